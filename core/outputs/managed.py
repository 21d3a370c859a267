"""What runs other programs says about them: Docker builds, and service and process managers.

A program run by something else fails in its own words, and then the thing
that ran it says so in its words: Docker BuildKit's ``ERROR: process
"/bin/sh -c cargo build" did not complete successfully: exit code: 101`` and
``ERROR: failed to solve: …``, the classic builder's ``The command … returned
a non-zero code: 2``, systemd's ``Main process exited, code=exited,
status=1/FAILURE``, supervisord's ``exited: mailer (exit status 1; not
expected)`` and ``gave up: … entered FATAL state``, docker compose's and
foreman's ``web.1 exited with code 1``, turbo's ``command finished with
error``. Those lines only say that what ran failed, so they are ranked after
the program's own errors (:data:`~.doc.RANK_AFTER`); when the program's
output says nothing, they are what there is. A line of theirs that does say
why (``failed to solve: failed to compute cache key: "/app/go.sum" not
found``, supervisord's ``spawnerr: can't find command``) is a root cause.
The Dockerfile excerpt BuildKit prints under a failure is accounted for.

:func:`read_docker` is a build tool's reader (an output it recognises is a
build); :func:`read_services` is read with the runtime readers, so that a
service's log is still read as a log.
"""

from __future__ import annotations

import re

from .doc import RANK_AFTER, RANK_ROOT, Doc, Finding, Reading, shorten

__all__ = ["read_docker", "read_services"]

#: What says only that a step's command failed.
_STEP_FAILED = re.compile(r"did not complete successfully|executor failed running|returned a non-zero code|"
                          r"exit code: \d+\s*$", re.IGNORECASE)
_BUILDKIT_ERROR = re.compile(r"^(?:#\d+ )?ERROR(?: \[[^\]]*\])?: (?P<msg>.+)$")
_SOLVE = re.compile(r"^(?:ERROR|error): failed to (?:solve|build)(?: with frontend dockerfile\.v0)?: (?P<msg>.+)$")
_CLASSIC = re.compile(r"^The command '.*' returned a non-zero code: \d+$|^ERROR: Service '[^']+' failed to build")
_DOCKERFILE_AT = re.compile(r"^Dockerfile(?:\.\w+)?:\d+$")
_RULE = re.compile(r"^-{6,}$")
_RECAP_HEAD = re.compile(r"^ > \[.*\]( .*)?:$")


def read_docker(doc: Doc, r: Reading) -> None:
    """Docker's own lines about a build (see the module doc)."""
    hits = doc.lines_with("ERROR", "error: failed to", "returned a non-zero code", "Dockerfile", " > [", "------")
    if not hits:
        return
    seen = False
    for i in hits:
        if i + 1 in r.claimed:
            continue
        line = doc.lines[i].rstrip()
        m = _SOLVE.match(line)
        if m:
            seen = True
            msg = m.group("msg")
            rank = RANK_AFTER if _STEP_FAILED.search(msg) else RANK_ROOT
            r.add(Finding(i + 1, "error", "docker build", f"docker: failed to solve: {shorten(msg, 200)}", rank,
                          reader="docker"))
            continue
        if _CLASSIC.match(line):
            seen = True
            r.add(Finding(i + 1, "error", "docker build", f"docker: {shorten(line, 200)}", RANK_AFTER, reader="docker"))
            continue
        m = _BUILDKIT_ERROR.match(line)
        if m and line.startswith("#"):
            seen = True
            msg = m.group("msg")
            rank = RANK_AFTER if _STEP_FAILED.search(msg) else RANK_ROOT
            r.add(Finding(i + 1, "error", "docker build", f"docker: step failed: {shorten(msg, 200)}", rank,
                          reader="docker"))
            continue
        if _DOCKERFILE_AT.match(line):
            # the excerpt: "Dockerfile:14", a rule, the numbered lines with ">>>", a rule
            j = i + 1
            rules = 0
            while j < doc.n and j - i < 30 and rules < 2:
                if re.match(r"^-{10,}$", doc.lines[j].strip()):
                    rules += 1
                elif not re.match(r"^\s*\d+ \|", doc.lines[j]):
                    break
                j += 1
            if rules:
                seen = True
                r.claim_range(i + 1, j)
            continue
        if _RECAP_HEAD.match(line) or _RULE.match(line.strip()):
            r.claim(i + 1)
    if seen:
        r.saw("docker")


_SERVICE_AFTER = re.compile(
    r"\.service: (?:Main process exited|Failed with result|Control process exited|Start request repeated too quickly|"
    r"Scheduled restart job)|^Failed to start .*\.service|"
    r"^(?:WARN |INFO |CRIT )?(?:exited: \S+ \(exit status \d+; not expected\)|gave up: \S+ entered FATAL state)|"
    r"^[\w.@-]+ exited with code \d+$|^sending SIGTERM to all processes$|"
    r"^(?:ERROR: )?command finished with error|^\s*Failed:\s+\S+#\S+|^\s*ERROR\s+run failed:|"
    r"\bELIFECYCLE\b.*Command failed|Back-off restarting failed container|^\S+ exited with code \d+ \(",
    re.IGNORECASE)
_SERVICE_ROOT = re.compile(r"spawnerr: (?P<msg>.+)$|\.service: Failed to (?:execute|locate executable|load) .+$")


def read_services(doc: Doc, r: Reading) -> None:
    """Service and process managers' lines about what they ran (see the module doc)."""
    for i in doc.lines_with("exited", "Failed", "failed", "gave up", "spawnerr", "SIGTERM", "ELIFECYCLE",
                            "Back-off", "command finished with error", "run failed"):
        if i + 1 in r.claimed:
            continue
        line = doc.lines[i].strip()
        m = _SERVICE_ROOT.search(line)
        if m:
            r.add(Finding(i + 1, "error", "service", shorten(line, 200), RANK_ROOT, reader="service manager"))
        elif _SERVICE_AFTER.search(line):
            r.add(Finding(i + 1, "error", "service", shorten(line, 200), RANK_AFTER, reader="service manager"))
