"""The NVRTC child process of toolchain.compile, run as a script by its path so that it imports NVRTC's bindings
and nothing else (importing the tiles package first took 1.4 s of a 3 s compile here):

    python nvrtc_worker.py SOURCE OUT OPTIONS_JSON [cubin|ptx]

prints the program log, writes the image, and exits 1 where NVRTC refused the source."""
import json
import sys
from pathlib import Path


def main(src_path: str, out_path: str, opts_json: str, kind: str = "cubin") -> int:
    from cuda.bindings import nvrtc

    src = Path(src_path).read_bytes()
    opts = [o.encode() for o in json.loads(opts_json)]
    err, prog = nvrtc.nvrtcCreateProgram(src, Path(src_path).name.encode(), 0, [], [])
    (rc,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    _, n = nvrtc.nvrtcGetProgramLogSize(prog)
    log = b" " * n
    nvrtc.nvrtcGetProgramLog(prog, log)
    sys.stdout.write(log.rstrip(b"\x00 ").decode(errors="replace"))
    if rc != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        return 1
    size, get = (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX) if kind == "ptx" else \
        (nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN)
    _, n = size(prog)
    image = b" " * n
    get(prog, image)
    Path(out_path).write_bytes(image)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
