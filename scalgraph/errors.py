"""The one exception type that the command line turns into a single clear line and a non-zero exit,
and the escaping that keeps text taken from inputs from steering the user's terminal."""
from __future__ import annotations

import os
import re
import sys

# C0 and C1 control characters and DEL (ESC sequences set titles and clear screens); \t and \n are
# allowed through only where a report lays out its own lines (keep_layout=True)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_CONTROL_BUT_LAYOUT = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _escape(m: re.Match) -> str:
    c = m.group(0)
    return {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(c, f"\\x{ord(c):02x}")


def printable(text: str, keep_layout: bool = False) -> str:
    """`text` with control characters shown as escapes (\\x1b, \\n, ...); keep_layout keeps \\n and \\t,
    for whole reports whose own lines are laid out with them."""
    return (_CONTROL_BUT_LAYOUT if keep_layout else _CONTROL).sub(_escape, str(text))


class UserError(Exception):
    """Bad input or environment: the message says what is wrong and what to do. Never shown with a traceback.
    The message is always one line: control characters from file names or file contents are escaped."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(printable(message))
        self.exit_code = exit_code


def os_failure(e: OSError, action: str, advice: str = "",
               reasons: dict[type[OSError], str] | None = None) -> UserError:
    """The one line for a failed file operation: "ACTION: REASON[; ADVICE]".  REASON is the system's
    words (strerror) unless `reasons` has better ones for this kind of error (FileExistsError: "a
    file is in the way")."""
    reason = next((text for kind, text in (reasons or {}).items() if isinstance(e, kind)), None)
    reason = reason or e.strerror or str(e) or type(e).__name__
    return UserError(f"{action}: {reason}" + (f"; {advice}" if advice else ""))


def run_reporting(prog: str, work, bug_hint: str) -> int:
    """Run `work()` as the command `prog`: its exit status, or one line on stderr and a non-zero
    status.  A UserError says its message (its exit code), Ctrl-C 130, a closed output pipe 0, no
    memory 2; any other exception is a bug of ours: one line with `bug_hint` (exit 70), the traceback
    only with SCALGRAPH_DEBUG=1."""
    try:
        return work()
    except UserError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except MemoryError:
        print(f"{prog}: out of memory: the input is larger than this machine can hold", file=sys.stderr)
        return 2
    except Exception as e:
        if os.environ.get("SCALGRAPH_DEBUG") == "1":
            raise
        print(printable(f"{prog}: internal error: {type(e).__name__}: {e} ({bug_hint})"), file=sys.stderr)
        return 70
