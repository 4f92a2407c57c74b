"""Not part of the CDK: one way for the compatibility layer to say what it does not do yet."""


class NotSupportedInSandbox(NotImplementedError):
    """A CDK behaviour the Sluice compatibility layer does not provide (yet)."""


def unsupported(what: str) -> NotSupportedInSandbox:
    return NotSupportedInSandbox(f"not supported in the Sluice sandbox yet: {what}")
