"""Whether the SDK is reading the connector's warm-up pages (`Source.warm_up`): that happens while
the component is built, where no host answers its imports (calling one would fail the build), so
the SDK refuses them with an error that ends the page instead."""

from .errors import Error

active = False


def refuse_host(what: str) -> None:
    if active:
        raise Error.system(f"{what}: a warm-up page runs with no host, its steps may only compute")
