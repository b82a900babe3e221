"""kueue: an exact model of Kueue's scheduler.

When ``scripts/compile-model.sh`` has built the model modules for these very sources, the
build's directory comes first on this package's search path (:mod:`sky_kueue.kueue.compiled`).
"""

from sky_kueue.kueue import compiled as _compiled

__path__ = _compiled.search_path(list(__path__))
