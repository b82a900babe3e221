"""``$(VAR)`` references in a container's ``command`` and ``args``, expanded as a kubelet does.

Why: the controller's Deployment passes ``--identity=$(POD_NAME)`` and
``--lease-namespace=$(POD_NAMESPACE)``; Kubernetes expands these from the container's
environment before starting it. Unexpanded, both replicas would share the literal identity
``$(POD_NAME)`` and both believe they hold the Lease.

The rules (``third_party/forked/golang/expansion/expand.go`` in kubernetes/kubernetes,
``MappingFuncFor`` in ``pkg/kubelet/kubecontainer``): ``$(NAME)`` becomes the variable's value
when it is defined and stays as written when it is not; ``$$`` is an escaped ``$``; a ``$``
followed by anything else, or an unterminated ``$(``, is kept literally.
"""

from __future__ import annotations

from collections.abc import Mapping


def expand(text: str, env: Mapping[str, str]) -> str:
    """``text`` with ``$(NAME)`` references to ``env`` replaced, per Kubernetes' rules."""
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "$" or i + 1 >= len(text):
            out.append(char)
            i += 1
            continue
        following = text[i + 1]
        if following == "$":  # escaped: $$ -> $
            out.append("$")
            i += 2
            continue
        if following == "(":
            end = text.find(")", i + 2)
            if end != -1:
                name = text[i + 2 : end]
                out.append(env[name] if name in env else text[i : end + 1])
                i = end + 1
                continue
        out.append(char)
        i += 1
    return "".join(out)


def expand_all(argv: list[str], env: Mapping[str, str]) -> list[str]:
    """Every element of a container's ``command`` + ``args`` expanded."""
    return [expand(arg, env) for arg in argv]
