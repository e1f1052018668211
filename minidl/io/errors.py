"""The error every unreadable checkpoint raises."""


class CheckpointError(ValueError):
    """A file that is not a readable minidl checkpoint; the message names the file and what
    is wrong with it."""
