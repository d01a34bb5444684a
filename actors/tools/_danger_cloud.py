"""Rules for cloud and cluster tools: deleting what lives outside this machine.

A careless model cleaning up can remove a bucket, a namespace or a repository in one line,
and no local backup brings it back. These need approval (key ``cloud-delete``):
``kubectl delete``, ``helm uninstall``, ``terraform destroy`` (and ``apply -destroy``),
``pulumi destroy``, ``aws s3 rm --recursive`` / ``s3 rb`` / any ``aws ... delete-*`` or
``terminate-*``, ``gcloud ... delete``, ``az ... delete``, ``gh repo|release delete``,
``docker system|volume prune`` and ``docker volume rm``.
"""

from __future__ import annotations

from ._danger_scan import Ctx, Rule, positionals
from ._danger_shell import Word


def _warn(ctx: Ctx, what: str) -> None:
    shown = " ".join([ctx.name, *(w.text for w in ctx.args[:3])])
    ctx.analysis.warn("cloud-delete", f"deletes {what}, which nothing on this machine can restore ({shown})")


def _words(ctx: Ctx) -> list[str]:
    return [w.text for w in positionals(ctx.args)]


def _kubectl(ctx: Ctx) -> None:
    if _words(ctx)[:1] == ["delete"]:
        _warn(ctx, "cluster resources")


def _helm(ctx: Ctx) -> None:
    if _words(ctx)[:1] in (["uninstall"], ["delete"], ["del"], ["un"]):
        _warn(ctx, "a release and its cluster resources")


def _destroyer(ctx: Ctx) -> None:
    """terraform / tofu / pulumi: ``destroy``, or ``apply -destroy``."""
    words = _words(ctx)
    texts = [w.text for w in ctx.args]
    if words[:1] == ["destroy"] or (words[:1] == ["apply"] and any(t in ("-destroy", "--destroy") for t in texts)):
        _warn(ctx, "the infrastructure it manages")


def _aws(ctx: Ctx) -> None:
    words = _words(ctx)
    texts = [w.text for w in ctx.args]
    if words[:2] == ["s3", "rb"] or (words[:2] == ["s3", "rm"] and "--recursive" in texts):
        _warn(ctx, "a bucket's objects")
    elif len(words) >= 2 and words[1].startswith(("delete-", "terminate-", "remove-", "deregister-")):
        _warn(ctx, "cloud resources")


def _gcloud_like(ctx: Ctx) -> None:
    """gcloud / az / doctl: the verb comes after the resource group (``gcloud compute instances delete``)."""
    if any(w in ("delete", "destroy", "purge") for w in _words(ctx)[:5]):
        _warn(ctx, "cloud resources")


def _gh(ctx: Ctx) -> None:
    words = _words(ctx)
    if len(words) >= 2 and words[0] in ("repo", "release", "secret", "variable", "gist") and words[1] == "delete":
        _warn(ctx, f"a GitHub {words[0]}")


def container_deletes(ctx: Ctx, words: list[Word]) -> None:
    """``docker``/``podman``/``kubectl`` (prefix rules, for their ``exec``) past their global options: the deletes."""
    texts = [w.text for w in positionals(words)]
    if ctx.name == "kubectl" and texts[:1] == ["delete"]:
        _warn(ctx, "cluster resources")
    elif texts[:2] in (["system", "prune"], ["volume", "prune"], ["volume", "rm"], ["volume", "remove"]):
        _warn(ctx, "container volumes and the data in them")


CLOUD_RULES: dict[str, Rule] = {
    "oc": _kubectl,
    "helm": _helm,
    "terraform": _destroyer,
    "tofu": _destroyer,
    "pulumi": _destroyer,
    "aws": _aws,
    "gcloud": _gcloud_like,
    "az": _gcloud_like,
    "doctl": _gcloud_like,
    "gh": _gh,
}
"""``docker``, ``podman`` and ``kubectl`` are prefixes (their ``exec`` runs a command): see :func:`container_deletes`."""
