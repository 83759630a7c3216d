"""Reading a txl checkpoint (src/checkpoint/FORMAT.md) with h5py: the file a path names (a
checkpoint, a run folder, or its `latest` / `best` pointer), its digest, its resolved
configuration and its parameters by the names of the parameter table (src/model/params.def;
weights [in, out], y = x W)."""
import glob
import hashlib
import os
import re

import h5py
import numpy as np

from txl.errors import TxlError

DIGEST_BYTES = 512  # the user block that holds the digest header
_DIGEST_HEAD = b"txl-checkpoint digest 1\n"


def _pointer(folder, name):
    """The file folder/name (`latest` or `best`) names, or a TxlError saying why it names none."""
    p = os.path.join(folder, name)
    try:
        with open(p, "r", encoding="utf-8") as f:
            target = f.readline().strip()
    except OSError:
        if name == "best":
            raise TxlError("%s: no 'best' pointer (it is written with a checkpoint at a validation that improves on "
                           "the best so far: none yet)" % folder) from None
        raise TxlError("%s: no such pointer" % p) from None
    if not target:
        raise TxlError("%s is empty: it names no checkpoint" % p)
    path = target if os.path.isabs(target) else os.path.join(folder, target)
    if not os.path.isfile(path):
        raise TxlError("%s names %s, which does not exist" % (p, path))
    return path


def resolve(target, best=False):
    """The checkpoint file `target` names, as txl-eval and txl-generate choose it: a file; a run
    folder (its `latest`, else its newest ckpt-<step>.h5 whose digest checks); a `latest` or `best`
    pointer; with best=True the folder's `best`."""
    target = os.fspath(target)
    if os.path.isdir(target):
        if best:
            return _pointer(target, "best")
        try:
            return _pointer(target, "latest")
        except TxlError as why_not:
            for path in sorted(glob.glob(os.path.join(target, "ckpt-*.h5")), reverse=True):
                try:
                    verify_digest(path)
                    return path
                except TxlError:
                    continue
            raise TxlError("%s: no checkpoint in this folder (%s)" % (target, why_not)) from None
    if best:
        raise TxlError("%s: best=True takes a run folder (it uses the checkpoint its 'best' pointer names)" % target)
    base = os.path.basename(target)
    if base in ("latest", "best") and os.path.isfile(target):
        return _pointer(os.path.dirname(target) or ".", base)
    if not os.path.exists(target):
        raise TxlError("%s: no such file or folder" % target)
    return target


def verify_digest(path):
    """Checks the SHA-256 digest in the file's first 512 bytes (FORMAT.md, "The digest"), streamed.
    Returns False for a file without a digest (written by an older txl: only HDF5's checksums
    guard it); raises TxlError for a damaged or truncated one."""
    with open(path, "rb") as f:
        head = f.read(DIGEST_BYTES)
        if head[:8] == b"\x89HDF\r\n\x1a\n":
            return False
        if len(head) < DIGEST_BYTES or not head.startswith(_DIGEST_HEAD):
            raise TxlError("%s: the checkpoint is damaged: its digest header (the file's first 512 bytes) is not as "
                           "txl writes it" % path)
        m = re.match(rb"txl-checkpoint digest 1\nsize ([0-9]+)\nsha256 ([0-9a-f]{64})\n", head)
        if not m:
            raise TxlError("%s: the checkpoint is damaged: its digest header is not as txl writes it" % path)
        size, stored = int(m.group(1)), m.group(2).decode()
        actual = os.fstat(f.fileno()).st_size
        if actual != size:
            raise TxlError("%s: the checkpoint is truncated: the file has %d bytes, it should have %d"
                           % (path, actual, size))
        h = hashlib.sha256()
        at = m.start(2)
        h.update(head[:at] + b"0" * 64 + head[at + 64:])
        while True:
            block = f.read(4 << 20)
            if not block:
                break
            h.update(block)
    if h.hexdigest() != stored:
        raise TxlError("%s: the checkpoint is damaged: its SHA-256 digest does not match (the file's is %s..., "
                       "written %s...)" % (path, h.hexdigest()[:12], stored[:12]))
    return True


def parse_ini(text):
    """txl_config_write_ini's text as {"section.key": value string} (a `# default ...` note after
    a value is dropped)."""
    out, section = {}, ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            continue
        if "=" in line:
            k, v = line.split("=", 1)
            out["%s.%s" % (section, k.strip())] = re.sub(r"\s+# default .*$", "", v.strip()).strip()
    return out


def attr_str(v):
    return v.decode() if isinstance(v, (bytes, np.bytes_)) else str(v)


class Checkpoint:
    """What a checkpoint holds for a model: `path`, `config` ({"section.key": string}), `params`
    ({name: float32 array} in params.def's names and [in, out] layout), `attrs` (the root
    attributes, strings decoded), `step`."""

    def __init__(self, path, config, params, attrs):
        self.path, self.config, self.params, self.attrs = path, config, params, attrs
        self.step = int(attrs["step"])

    def get(self, key, kind=str):
        """The configuration value `section.key` as `kind` (str, int, float or bool)."""
        if key not in self.config:
            raise TxlError("%s: the checkpoint's configuration has no key '%s'" % (self.path, key))
        v = self.config[key]
        if kind is bool:
            if v.lower() in ("true", "1", "yes", "on"):
                return True
            if v.lower() in ("false", "0", "no", "off"):
                return False
            raise TxlError("%s: configuration key '%s' = '%s' is not a boolean" % (self.path, key, v))
        try:
            return kind(v)
        except ValueError:
            raise TxlError("%s: configuration key '%s' = '%s' is not a %s" % (self.path, key, v, kind.__name__)) from None


def read(target, best=False, verify=True):
    """The Checkpoint `target` names (see resolve). verify=False skips the digest check."""
    path = resolve(target, best)
    if verify:
        verify_digest(path)
    try:
        with h5py.File(path, "r") as f:
            attrs = {k: (attr_str(v) if isinstance(v, (bytes, np.bytes_, str)) else v) for k, v in f.attrs.items()}
            if attrs.get("format") != "txl-checkpoint":
                raise TxlError("%s: not a txl checkpoint (root attribute 'format')" % path)
            if int(attrs.get("format_version", -1)) not in (1, 2):
                raise TxlError("%s: format_version %s, this package reads 1 and 2" % (path, attrs.get("format_version")))
            if "params" not in f:
                raise TxlError("%s: no /params group" % path)
            params = {name: np.asarray(ds[()], dtype=np.float32) for name, ds in f["params"].items()}
    except OSError as e:
        raise TxlError("%s: cannot read it as HDF5: %s" % (path, e)) from None
    return Checkpoint(path, parse_ini(attrs.get("config", "")), params, attrs)
