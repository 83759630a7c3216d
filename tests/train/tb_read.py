"""A small reader of TensorBoard event files (Python's standard library only), for the tests of
run.tensorboard: TFRecord framing with both masked CRC32Cs checked, the Event, Summary, Value and
SessionLog fields decoded by hand, independently of src/train/tb_events.c.

  python3 tb_read.py DIR   prints one line per event file and one per event (a look by hand)
As a module: history(DIR) reads a folder the way TensorBoard does (files in name order, a
SessionLog START at step s dropping what was read of steps >= s) and returns
{tag: [(step, value), ...]}; read_file(PATH) gives the events of one file; metrics_scalars and
compare check them against the run's metrics.jsonl."""
import math
import os
import struct
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class Damaged(Exception):
    pass


def varint(buf, at):
    v, shift = 0, 0
    while True:
        if at >= len(buf) or shift > 63:
            raise Damaged("varint runs past the message")
        b = buf[at]
        at += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, at


def fields(buf):
    """(field number, wire type, value) of a protobuf message: int for VARINT, bytes otherwise."""
    at = 0
    while at < len(buf):
        key, at = varint(buf, at)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, at = varint(buf, at)
        elif wire in (1, 5):
            n = 8 if wire == 1 else 4
            if at + n > len(buf):
                raise Damaged("fixed field runs past the message")
            v, at = buf[at:at + n], at + n
        elif wire == 2:
            n, at = varint(buf, at)
            if at + n > len(buf):
                raise Damaged("bytes field runs past the message")
            v, at = buf[at:at + n], at + n
        else:
            raise Damaged("wire type %d" % wire)
        yield field, wire, v


def decode_event(data):
    """{"wall_time", "step", "file_version", "values": [(tag, float)], "start": bool}"""
    e = {"wall_time": None, "step": 0, "file_version": None, "values": [], "start": False}
    for f, w, v in fields(data):
        if f == 1 and w == 1:
            e["wall_time"] = struct.unpack("<d", v)[0]
        elif f == 2 and w == 0:
            e["step"] = v - (1 << 64) if v >= 1 << 63 else v
        elif f == 3 and w == 2:
            e["file_version"] = v.decode()
        elif f == 5 and w == 2:
            for vf, vw, value in fields(v):
                if vf != 1 or vw != 2:
                    continue
                tag, simple = None, None
                for xf, xw, x in fields(value):
                    if xf == 1 and xw == 2:
                        tag = x.decode()
                    elif xf == 2 and xw == 5:
                        simple = struct.unpack("<f", x)[0]
                if tag is None or simple is None:
                    raise Damaged("a Value without tag or simple_value")
                e["values"].append((tag, simple))
        elif f == 7 and w == 2:
            e["start"] = any(sf == 1 and sw == 0 and sv == 1 for sf, sw, sv in fields(v))
    return e


def read_file(path):
    """The events of one file; Damaged on a CRC that fails or a record cut short."""
    buf = open(path, "rb").read()
    at, events = 0, []
    while at < len(buf):
        if len(buf) - at < 12:
            raise Damaged("%s: a record header cut short at byte %d" % (path, at))
        head = buf[at:at + 8]
        (n,) = struct.unpack("<Q", head)
        (crc,) = struct.unpack("<I", buf[at + 8:at + 12])
        if crc != masked(head):
            raise Damaged("%s: the length's CRC fails at byte %d" % (path, at))
        if at + 16 + n > len(buf):
            raise Damaged("%s: a record cut short at byte %d" % (path, at))
        data = buf[at + 12:at + 12 + n]
        (crc,) = struct.unpack("<I", buf[at + 12 + n:at + 16 + n])
        if crc != masked(data):
            raise Damaged("%s: the data's CRC fails at byte %d" % (path, at))
        events.append(decode_event(data))
        at += 16 + n
    return events


def event_files(folder):
    return sorted(n for n in os.listdir(folder) if "tfevents" in n)


def history(folder):
    """{tag: [(step, value)]} as TensorBoard shows the folder's files, which must each begin with
    file_version "brain.Event:2" (Damaged otherwise)."""
    scalars = {}
    for name in event_files(folder):
        events = read_file(os.path.join(folder, name))
        if not events or events[0]["file_version"] != "brain.Event:2":
            raise Damaged("%s: its first event has no file_version brain.Event:2" % name)
        for e in events:
            if e["start"]:
                for tag in scalars:
                    scalars[tag] = [(s, v) for s, v in scalars[tag] if s < e["step"]]
            for tag, v in e["values"]:
                scalars.setdefault(tag, []).append((e["step"], v))
    return scalars


def metrics_scalars(path):
    """{tag: [(step, value, tolerance)]} that a run's event files must hold for its metrics.jsonl:
    each line's figures tagged "<kind>/<key>" at its step, the "unigram" line's
    "unigram/<split>_<key>" at step 0; None for a figure written as null (NaN or infinite).
    The tolerance: the event holds the float32 of the double that the line prints with D
    decimals (or %.6e), so |event - printed| <= half a unit of the printed last digit (the
    printing's rounding) + |double| * 2^-24 (float32 rounds to 24 significant bits: a relative
    error of at most 2^-24), |double| <= |printed| + that half unit; times 1 + 1e-9 for the
    float64 arithmetic of the check itself."""
    import json
    want = {}
    for line in open(path):
        r = json.loads(line, parse_float=lambda t: t, parse_int=lambda t: t, parse_constant=lambda t: t)
        kind = r.pop("kind")
        if kind == "unigram":
            prefix, step = "unigram/%s_" % r.pop("split"), 0
        else:
            prefix, step = kind + "/", int(r.pop("step"))
        for key, text in r.items():
            if text is None:
                want.setdefault(prefix + key, []).append((step, None, 0.0))
                continue
            mantissa, _, exp = text.lower().partition("e")
            decimals = len(mantissa.partition(".")[2])
            half = 0.5 * 10.0 ** (int(exp or 0) - decimals)
            v = float(text)
            tol = (half + (abs(v) + half) * 2.0 ** -24) * (1 + 1e-9)
            want.setdefault(prefix + key, []).append((step, v, tol))
    return want


def compare(got, want):
    """The differences between {tag: [(step, value)]} (an event folder as read) and
    metrics_scalars' {tag: [(step, value, tolerance)]}: tags, steps (in order: no repeated or
    stale step) and each value within its tolerance; [] when they agree."""
    problems = []
    if sorted(got) != sorted(want):
        problems.append("tags: events have %s, metrics.jsonl %s" % (sorted(got), sorted(want)))
    for tag in sorted(set(got) & set(want)):
        gs, ws = [s for s, _ in got[tag]], [s for s, _, _ in want[tag]]
        if gs != ws:
            problems.append("%s: steps %s in the events, %s in metrics.jsonl" % (tag, gs, ws))
            continue
        for (step, g), (_, w, tol) in zip(got[tag], want[tag]):
            if w is None:
                if math.isfinite(g):
                    problems.append("%s step %d: %r in the events, null in metrics.jsonl" % (tag, step, g))
            elif not abs(g - w) <= tol:
                problems.append("%s step %d: %r in the events, %r in metrics.jsonl (tolerance %.3g)" % (tag, step, g, w, tol))
    return problems


if __name__ == "__main__":
    for name in event_files(sys.argv[1]):
        events = read_file(os.path.join(sys.argv[1], name))
        print("%s: %d events" % (name, len(events)))
        for e in events:
            print("  step %d%s%s %s" % (e["step"], " file_version " + e["file_version"] if e["file_version"] else "",
                                        " START" if e["start"] else "",
                                        " ".join("%s=%r" % tv for tv in e["values"])))
