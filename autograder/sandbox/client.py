"""The grader's end of the connection to a sandboxed kernel: it cannot be made to hold much output at once.

A hostile kernel decides what it sends. :class:`CappedKernelClient` bounds
what the grader receives: no single message over ``max_message_bytes`` (ZMQ
refuses it), and at most ``queued_messages`` waiting. The per-cell and
per-notebook caps on what is *kept* are in :mod:`autograder.sandbox`.
"""

from __future__ import annotations

import itertools

import zmq
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.connect import channel_socket_types
from traitlets import Integer

_MONITORS = itertools.count()


class CappedKernelClient(AsyncKernelClient):
    """A kernel client that cannot be made to hold much of the kernel's output at once.

    Its sockets refuse any single message over ``max_message_bytes``: ZMQ
    drops the connection instead of delivering it, and does not reconnect
    (:meth:`lost_messages` notices, :meth:`reconnect_iopub` repairs). At most
    ``queued_messages`` wait in the grader; a faster kernel waits, or its
    messages are dropped on its side.
    """

    max_message_bytes = Integer(16 * 2**20, help="Largest message accepted, bytes.").tag(config=True)
    queued_messages = Integer(16, help="Messages received ahead of the grader (ZMQ RCVHWM).").tag(config=True)

    def _create_connected_socket(self, channel, identity=None):
        # as jupyter_client's, with the size cap set before connecting (it applies per connection)
        sock = self.context.socket(channel_socket_types[channel])
        sock.linger = 1000
        sock.maxmsgsize = self.max_message_bytes
        sock.rcvhwm = self.queued_messages  # a flood waits in the kernel (or is dropped there), not here
        if identity:
            sock.identity = identity
        if getattr(self, "curve_publickey", None) is not None:
            sock.curve_secretkey = self.curve_secretkey
            sock.curve_publickey = self.curve_publickey
            sock.curve_serverkey = self.curve_publickey
        if channel == "iopub":
            self._iopub_events = self._monitor(sock)
        sock.connect(self._make_url(channel))
        return sock

    def _monitor(self, sock):
        address = f"inproc://iopub-monitor-{id(self)}-{next(_MONITORS)}"
        sock.monitor(address, zmq.EVENT_DISCONNECTED)
        events = zmq.Context.shadow(self.context.underlying).socket(zmq.PAIR)
        events.linger = 0
        events.connect(address)
        return events

    def lost_messages(self) -> int:
        """How many times the kernel's output connection was dropped since the last call.

        Returns
        -------
        int
            While the kernel is alive, the number of messages lost for being
            over ``max_message_bytes`` (ZMQ drops the connection for each).
        """
        events = getattr(self, "_iopub_events", None)
        count = 0
        while events is not None:
            try:
                events.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            count += 1
        return count

    def _close_events(self) -> None:
        events = getattr(self, "_iopub_events", None)
        if events is not None:
            events.close()
            self._iopub_events = None

    def reconnect_iopub(self) -> None:
        """A new output connection after ZMQ dropped one (it does not reconnect after an oversized message)."""
        if self._iopub_channel is not None:
            self._iopub_channel.close()
            self._iopub_channel = None
        self._close_events()
        self.iopub_channel.start()

    def stop_channels(self) -> None:
        self._close_events()
        super().stop_channels()
