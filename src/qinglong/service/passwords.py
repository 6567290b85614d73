"""The password rule (docs/security.md#passwords).

Length alone lets ``password12`` through. We follow NIST SP 800-63B rather than composition
rules (no "one upper, one digit, one symbol", which push people to ``Password1!``): a password
is 10 to 1024 printable characters and is refused when it is easy to guess whatever its length:

- a common password, or a common word with digits or symbols around it (``password12``,
  ``P@ssw0rd2024!``, ``2024summer``): the ends are stripped of digits, spaces and symbols,
  the usual look-alike substitutions (0->o, 1->i, 3->e, 4->a, 5->s, 7->t, @->a, $->s, !->i)
  undone, and the rest looked up in a small built-in list (below) of the passwords and base
  words that top every published leak, plus this product's own words;
- the user's name, the same way;
- a keyboard or alphabet run (``qwertyuiop``, ``1q2w3e4r5t``, ``abcdef1234``), or one
  repeated (``qwertyqwerty``);
- fewer than 5 different characters (``aaaaaaaaaa``, ``1212121212``);
- a short word padded out with digits or symbols: what is left once the ends are stripped must
  be at least 6 characters (``tiger12345`` is a 5-letter word and a count).

A passphrase of a few unrelated words (``correct horse battery staple``) or a password
manager's random password passes. Messages name the rule, never the password.
"""

from __future__ import annotations

import re

from qinglong.errors import InvalidInput

MIN_PASSWORD = 10
MAX_PASSWORD = 1024
MIN_DISTINCT = 5
MIN_CORE = 6

ADVICE = "choose a few unrelated words, or a password manager's random password"
_PADDING = re.compile(r"^[\W\d_]+|[\W\d_]+$")
_NOT_ALNUM = re.compile(r"[\W_]+")
_LOOK_ALIKES = str.maketrans("0134578@$!", "oieastbasi")

# Keyboard rows and columns (QWERTY, QWERTZ, AZERTY), the alphabet and the digits: any 4 or
# more characters in a row of one of these (either direction) is a run.
RUNS = ("abcdefghijklmnopqrstuvwxyz", "01234567890", "qwertyuiop", "asdfghjkl", "zxcvbnm",
        "qwertzuiop", "yxcvbnm", "azertyuiop", "qsdfghjklm", "wxcvbn",
        "1qaz2wsx3edc4rfv5tgb6yhn7ujm8ik9ol0p", "1q2w3e4r5t6y7u8i9o0p", "qazwsxedcrfvtgbyhnujm",
        "zaq1xsw2cde3vfr4bgt5", "q1w2e3r4t5y6u7i8o9p0", "a1s2d3f4g5h6j7k8l9")

# The passwords and base words that top every published leak, in their plain form (lowercase,
# look-alikes undone), and the words of this product and its setting.
_COMMON_WORDS = """
    password passwd passw pass pwd secret secrets letmein welcome welcomeback hello helloworld
    admin administrator root toor superuser sysadmin user username guest login logon test
    testing tester demo default changeme changeit temp temporary access master
    iloveyou loveyou lovely loveme iloveu fuckyou whatever nothing forever trustno trustme
    dragon monkey shadow sunshine princess superman batman spiderman starwars pokemon
    football baseball basketball soccer hockey golfer tennis liverpool chelsea arsenal
    barcelona realmadrid juventus yankees cowboys lakers
    michael jennifer jordan hunter ranger buster charlie thomas george daniel andrew joshua
    matthew robert william anthony jessica ashley amanda michelle nicole hannah maggie ginger
    pepper bailey harley mustang corvette ferrari porsche mercedes
    summer winter spring autumn flower cheese cookie chocolate banana orange computer internet
    freedom killer angel babygirl family blessed jesus heaven hottie purple silver diamond
    samsung google apple microsoft windows linux ubuntu debian server database postgres
    postgresql sqlite mysql oracle docker kubernetes office company business
    woaini mima nihao zhongguo beijing shanghai aini wangyi baidu tencent
    qinglong crontab cronjob scheduler schedule operator viewer worker control panel
    """
COMMON = frozenset(_COMMON_WORDS.split())


def check_password(value: object, field: str = "password", *, username: str | None = None) -> str:
    """``value`` when it is a password we accept, else InvalidInput naming the rule."""
    if not isinstance(value, str) or not MIN_PASSWORD <= len(value) <= MAX_PASSWORD:
        raise InvalidInput(field, f"must be {MIN_PASSWORD}-{MAX_PASSWORD} characters")
    if any(not ch.isprintable() for ch in value):
        raise InvalidInput(field, "must not contain control characters")
    weakness = password_weakness(value, username)
    if weakness is not None:
        raise InvalidInput(field, f"{weakness}: {ADVICE}")
    return value


def password_weakness(password: str, username: str | None = None) -> str | None:
    """Why ``password`` is easy to guess, or None."""
    lowered = password.lower()
    if len(set(lowered)) < MIN_DISTINCT:
        return f"is too repetitive (fewer than {MIN_DISTINCT} different characters)"
    if _is_run(_NOT_ALNUM.sub("", lowered)):
        return "is a keyboard or alphabet sequence (like qwerty or 123456)"
    core = _PADDING.sub("", lowered)
    if not core:
        return "is only digits and symbols"
    plain = core.translate(_LOOK_ALIKES)
    forms = {plain, _NOT_ALNUM.sub("", plain)}
    forms |= {_repeated_unit(form) for form in forms}
    if forms & COMMON:
        return "is a common password, or a common word with digits or symbols around it"
    if username is not None and forms & {username, username.split("@", 1)[0]}:
        return "is the user name, or the user name with digits or symbols added"
    if any(_is_run(form) for form in forms):
        return "is a keyboard or alphabet sequence with digits or symbols added"
    if len(core) < MIN_CORE:
        return (f"is a short word padded with digits or symbols (without them it must still "
                f"be {MIN_CORE} characters or more)")
    return None


def _repeated_unit(text: str) -> str:
    """``abcabcabc`` -> ``abc``: the shortest piece ``text`` repeats (itself if none)."""
    for size in range(1, len(text) // 2 + 1):
        if len(text) % size == 0 and text[:size] * (len(text) // size) == text:
            return text[:size]
    return text


def _is_run(text: str) -> bool:
    unit = _repeated_unit(text)
    return len(unit) >= 4 and any(unit in run or unit in run[::-1] for run in RUNS)
