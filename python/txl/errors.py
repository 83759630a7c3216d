"""The package's one error type: a message that names the file and the problem."""


class TxlError(Exception):
    pass
