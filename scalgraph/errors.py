"""The one exception type that the command line turns into a single clear line and a non-zero exit."""


class UserError(Exception):
    """Bad input or environment: the message says what is wrong and what to do. Never shown with a traceback."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code
