"""Banks of differently written answers, one module per assignment."""
