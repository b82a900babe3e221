"""Whether a pod's image reference parses, as a kubelet checks it before any pull.

Why: a kubelet refuses a reference the container-image grammar does not accept (a
``docker:`` prefix, upper-case letters in the repository, an empty path component) with
``InvalidImageName`` and never pulls (``pkg/kubelet/images/image_manager.go``: "Failed to apply
default image tag"). The sandbox used to look such a reference up in its recipes and answer
``ErrImagePull``; the real node showed SkyPilot's offline catalog naming
``docker:skypilot-sandbox/cpu:offline``, which the sandbox ran and a kubelet refuses.

The grammar is the one of the distribution project's reference package, written here from its
documented rules: ``[domain/]path[:tag][@digest]``, where the domain is a host name or IPv4
address with an optional port (or a bracketed IPv6 address), each path component is lower-case
letters and digits joined by ``.``, ``_``, ``__`` or runs of ``-``, a tag is at most 128 word
characters, dots and dashes not starting with either, and the name is at most 255 characters.
"""

from __future__ import annotations

import re

#: The longest name (domain and path) a reference may have, in characters.
NAME_MAX_CHARS = 255

_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(
    rf"(?P<name>(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)(?::{_TAG})?(?:@{_DIGEST})?"
)


def invalid_reason(reference: str) -> str | None:
    """Why a kubelet refuses ``reference`` (its ``InvalidImageName`` message), or ``None``."""
    match = _REFERENCE.fullmatch(reference)
    if match is not None and len(match.group("name")) <= NAME_MAX_CHARS:
        return None
    if match is not None:
        detail = f"repository name must not be more than {NAME_MAX_CHARS} characters"
    elif _REFERENCE.fullmatch(reference.lower()) is not None:
        detail = "invalid reference format: repository name must be lowercase"
    else:
        detail = "invalid reference format"
    return f'Failed to apply default image tag "{reference}": couldn\'t parse image reference "{reference}": {detail}'
