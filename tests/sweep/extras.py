"""The sweep tests need the [sweep] extra (dask[distributed], pyarrow): skipped locally when it is
missing, a failure in CI (``CI=true``), whose test extra installs both."""

from frontends.extras import require_extra

__all__ = ["require_sweep_extra"]


def require_sweep_extra():
    """Import dask.distributed and pyarrow or skip (fail in CI) naming the extra."""
    require_extra("pyarrow", "sweep")
    return require_extra("distributed", "sweep")
