"""Whether the SDK is reading the connector's warm-up pages (`Source.warm_up`): that happens while
the component is built, where no host answers its imports (calling one would fail the build), so
the SDK refuses them with an error that ends the page instead; a warm-up listing's `send()` is
answered from its sample answers (`samples`) instead."""

from .errors import Error

active = False
#: The sample answers left for a warm-up listing's `send()`, in order: (status, headers, body).
samples: list = []


def refuse_host(what: str) -> None:
    if active:
        raise Error.system(f"{what}: a warm-up page runs with no host, its steps may only compute")


def sample(what: str):
    """The next sample answer for a `send()` while warming up; past the last, the host's refusal."""
    if not samples:
        refuse_host(what)
    return samples.pop(0)
