"""The lifecycle engine: states and transitions, cases, promotion, verification, revocation."""

from lifecycle._actions import RevokeResult, promote, refute, revoke, verify
from lifecycle._cases import CaseRecord, close_case, get_case, open_case, write
from lifecycle._states import CIRCULATING, TRANSITIONS, State, decide

__all__ = [
    "CIRCULATING",
    "TRANSITIONS",
    "CaseRecord",
    "RevokeResult",
    "State",
    "close_case",
    "decide",
    "get_case",
    "open_case",
    "promote",
    "refute",
    "revoke",
    "verify",
    "write",
]
