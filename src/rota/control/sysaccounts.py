"""Which OS accounts a rota user may be mapped to without the operator saying so explicitly.

A user's jobs run as its OS account (``rota.control.accounts``). Mapping a member to ``root``,
or to a system account (``daemon``, ``postgres``, ``www-data``: uid below ``FIRST_PERSON_UID``)
gives her jobs the rights of the machine or of a service, and is almost always a slip; so it is
refused unless the operator asks for it (``rota user add --allow-system-account``, the API's
``allow_system_account``). The control plane's own account, when it is not root, is allowed:
in single-user mode every job runs as it anyway. An account that does not exist here has no
uid to judge by; only its name is (``root`` is refused everywhere).
"""

from __future__ import annotations

import os
import pwd

FIRST_PERSON_UID = 1000  # below: root and the system's service accounts (useradd's UID_MIN)


def system_account_refusal(account: str, euid: int | None = None) -> str | None:
    """Why mapping a user to OS account ``account`` needs ``allow_system_account``; None when
    it does not."""
    me = os.geteuid() if euid is None else euid
    try:
        uid = pwd.getpwnam(account).pw_uid
    except KeyError:
        uid = 0 if account == "root" else None
    if uid is None or uid >= FIRST_PERSON_UID or (uid == me and me != 0):
        return None
    what = ("the superuser (uid 0)" if uid == 0
            else f"a system account (uid {uid}, below {FIRST_PERSON_UID})")
    return (f"maps to OS user {account}, {what}: the user's jobs would run with its rights. "
            f"Map the user to a person's own account, or, if you mean it, repeat with "
            f"--allow-system-account (API: \"allow_system_account\": true)")
