"""A vendor compiler run in a child process, as every toolchain runs one: a compiler that crashes or hangs takes
only its child down, and the caller gets an exception (NVRTC 13.0 once segfaulted on a wgmma kernel)."""
from __future__ import annotations

import signal
import subprocess


class CompileError(RuntimeError):
    """The compiler rejected the source; the message carries its log."""


class CompilerCrash(RuntimeError):
    """The compiler process died (signal, timeout) instead of answering."""


def run(cmd: list[str], what: str, timeout: float) -> tuple[int, str]:
    """(exit status, stdout + stderr) of the compiler command; CompilerCrash if it was killed or timed out.
    `what` names the job in the message: "nvrtc compiling kernel.cu for sm_90a"."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CompilerCrash(f"{what}: did not finish within {timeout:.0f} s") from None
    log = p.stdout + p.stderr
    if p.returncode < 0:
        raise CompilerCrash(f"{what}: crashed ({signal.Signals(-p.returncode).name})\n{log}")
    return p.returncode, log
