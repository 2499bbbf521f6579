"""The grader's end of the connection to a sandboxed kernel: it cannot be made to hold much output at once.

A hostile kernel decides what it sends. :class:`CappedKernelClient` bounds
what the grader receives: no single message over ``max_message_bytes`` (ZMQ
refuses it), and at most ``queued_messages`` waiting. Both are ZMQ socket
options that the client's own ``zmq.Context`` sets on every socket it creates
(pyzmq's ``Context.setsockopt``: default options for new sockets), so they
apply from the first connection on. The per-cell and per-notebook caps on what
is *kept* are in :mod:`autograder.sandbox.caps`.
"""

from __future__ import annotations

import itertools

import zmq
import zmq.asyncio
from jupyter_client.asynchronous import AsyncKernelClient
from traitlets import default

from autograder.sandbox.limits import MessageLimits

_MONITORS = itertools.count()


class CappedKernelClient(MessageLimits, AsyncKernelClient):
    """A kernel client that cannot be made to hold much of the kernel's output at once.

    Its sockets refuse any single message over ``max_message_bytes``: ZMQ
    drops the connection instead of delivering it, and does not reconnect
    (:meth:`lost_messages` notices, :meth:`reconnect_iopub` repairs). At most
    ``queued_messages`` wait in the grader; a faster kernel waits, or its
    messages are dropped on its side. The kernel manager passes both from its
    settings (:class:`~autograder.sandbox.limits.MessageLimits`).
    """

    iopub_events = None  # a PAIR socket on which ZMQ reports the output connection's drops

    @default("context")
    def capped_context(self) -> zmq.asyncio.Context:
        """A context of this client's own whose sockets all carry the size cap and the queue limit."""
        context = zmq.asyncio.Context()
        context.setsockopt(zmq.MAXMSGSIZE, self.max_message_bytes)
        context.setsockopt(zmq.RCVHWM, self.queued_messages)
        return context

    def start_channels(self, *args, **kwargs) -> None:
        super().start_channels(*args, **kwargs)
        self.watch_iopub()

    def watch_iopub(self) -> None:
        """Listen for drops of the output connection (each is one message over the cap, while the kernel lives)."""
        self.close_events()
        address = f"inproc://iopub-monitor-{id(self)}-{next(_MONITORS)}"
        self.iopub_channel.socket.monitor(address, zmq.EVENT_DISCONNECTED)
        events = zmq.Context.shadow(self.context.underlying).socket(zmq.PAIR)  # a blocking socket, read without waiting
        events.linger = 0
        events.connect(address)
        self.iopub_events = events

    def lost_messages(self) -> int:
        """How many times the kernel's output connection was dropped since the last call.

        Returns
        -------
        int
            While the kernel is alive, the number of messages lost for being
            over ``max_message_bytes`` (ZMQ drops the connection for each).
        """
        count = 0
        while self.iopub_events is not None:
            try:
                self.iopub_events.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            count += 1
        return count

    def iopub_url(self) -> str:
        """The address of the kernel's output socket, from the connection info."""
        info = self.get_connection_info()
        if info["transport"] == "tcp":
            return f"tcp://{info['ip']}:{info['iopub_port']}"
        return f"{info['transport']}://{info['ip']}-{info['iopub_port']}"

    def reconnect_iopub(self) -> None:
        """Connect the output socket again after ZMQ dropped it (it does not reconnect after an oversized message)."""
        socket = self.iopub_channel.socket
        url = self.iopub_url()
        try:
            socket.disconnect(url)
        except zmq.ZMQError:
            pass  # ZMQ has forgotten the endpoint already
        socket.connect(url)

    def close_events(self) -> None:
        if self.iopub_events is not None:
            self.iopub_events.close()
            self.iopub_events = None

    def stop_channels(self) -> None:
        self.close_events()
        super().stop_channels()
        if not self.context.closed:  # the context is this client's own (capped_context)
            self.context.destroy(linger=100)
