"""The part of the backoff package custom code uses: on_exception with expo/constant waits.

Waiting goes through `sleep` below (time.sleep by default; the clock is the host's)."""

import functools
import time

sleep = time.sleep


def expo(base: float = 2, factor: float = 1, max_value=None):
    n = 0
    while True:
        value = factor * base**n
        yield value if max_value is None or value < max_value else max_value
        n += 1


def constant(interval: float = 1):
    while True:
        yield interval


def full_jitter(value: float) -> float:
    return value  # deterministic: no randomness inside the sandbox


def on_exception(wait_gen, exception, *, max_tries=None, max_time=None, jitter=full_jitter, giveup=lambda e: False,
                 on_success=None, on_backoff=None, on_giveup=None, raise_on_giveup=True, logger=None, **wait_gen_kwargs):
    def decorate(target):
        @functools.wraps(target)
        def retry(*args, **kwargs):
            tries = 0
            start = time.monotonic()
            wait = wait_gen(**wait_gen_kwargs)
            while True:
                tries += 1
                elapsed = time.monotonic() - start
                details = {"target": target, "args": args, "kwargs": kwargs, "tries": tries, "elapsed": elapsed}
                try:
                    result = target(*args, **kwargs)
                except exception as e:
                    max_tries_value = max_tries() if callable(max_tries) else max_tries
                    max_time_value = max_time() if callable(max_time) else max_time
                    if giveup(e) or (max_tries_value is not None and tries >= max_tries_value) or (max_time_value is not None and elapsed >= max_time_value):
                        if on_giveup:
                            on_giveup({**details, "exception": e})
                        if raise_on_giveup:
                            raise
                        return None
                    seconds = jitter(next(wait)) if jitter else next(wait)
                    if on_backoff:
                        on_backoff({**details, "wait": seconds, "exception": e})
                    sleep(seconds)
                    continue
                if on_success:
                    on_success(details)
                return result

        return retry

    return decorate
