"""Framework versions with a known memory leak, named in the hints of memory findings.

Read from `version` events (detail `framework`, `version`) that format specs emit; a log that
does not print its versions simply gets no version hint. Keep entries to leaks that maintainers
confirmed, with the thread that says so.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KnownIssue:
    framework: str  # lower case, as in Context.versions
    version: str  # exact version, or a prefix ending in "." (a whole minor series)
    subject: str  # "device", "host" or "any": which memory the leak shows in
    text: str

    def matches(self, version: str) -> bool:
        if self.version.endswith("."):
            return version.startswith(self.version)
        return version == self.version or version.startswith(self.version + "+")


KNOWN_ISSUES = (
    KnownIssue(
        "deepspeed",
        "0.16.0",
        "any",
        "This log runs DeepSpeed 0.16.0, whose ZeRO parameter offload has a known leak: offloaded parameter memory "
        "is not freed and the caching allocator fragments, growing across GPUs until OOM (Open-Reasoner-Zero #13). "
        "With offload_param on, upgrade DeepSpeed or patch runtime/zero/parameter_offload.py as Open-Reasoner-Zero did.",
    ),
    KnownIssue(
        "vllm",
        "0.7.",
        "any",
        "This log runs vLLM 0.7.x, whose rollout engine leaks memory under verl (verl #630, #429): try the vLLM v1 engine or a newer vLLM release.",
    ),
)


def known_issues(versions: dict[str, str], subject: str) -> list[str]:
    """Hints for the versions in this log that have a known leak showing in `subject` memory."""
    return [
        issue.text for issue in KNOWN_ISSUES if issue.framework in versions and issue.matches(versions[issue.framework]) and issue.subject in ("any", subject)
    ]
