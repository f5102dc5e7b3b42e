#!/usr/bin/env python3
"""Packs a folder into .tar.xz parts each small enough to ride beside the working tree in one device call (64 MiB
with the tree: docs/EVAL.md, "Issue 26: held-out-document unanswerables"), so that a bundle larger than what one call
can carry travels in several (one pN folder per call, each unpacked where it lands; the parts hold disjoint files).

    python3 tools/decoder_train/pack_parts.py ROOT OUT BYTES [NAME]

writes OUT/p1/NAME.tar.xz, OUT/p2/NAME.tar.xz, ... (NAME default "part"), paths relative to ROOT, every regular
file once; prints each part's size. Files are grouped by folder (a folder's small files compress together; a
folder's over half a part are halved into groups) and a file over 256 kB is a unit of its own; units are placed
largest first into the first part with room (sizes as xz gives them, measured here); a part that comes out over
BYTES, or a unit that alone exceeds it, is an error that says so. Symbolic links and other non-files under ROOT are refused.
"""
import io
import lzma
import os
import shutil
import sys
import tarfile

BIG = 256 * 1024
PRESET = 6


class Error(Exception):
    pass


def _xz_size(paths):
    c = lzma.LZMACompressor(preset=PRESET)
    n = 0
    for p in paths:
        with open(p, "rb") as f:
            n += len(c.compress(f.read()))
    return n + len(c.flush()) + 512 * len(paths) // 8  # tar headers, mostly zeros: they compress well


def _group(paths, most):
    """[(xz bytes, paths)]: the files together, halved (in name order) until each group is at most `most`."""
    n = _xz_size(paths)
    if n <= most or len(paths) == 1:
        return [(n, paths)]
    return _group(paths[:len(paths) // 2], most) + _group(paths[len(paths) // 2:], most)


def units(root, cap):
    """[(estimated xz bytes, [relative paths])]: per folder, its small files together (in groups of at most half a
    part); each big file alone."""
    out = []
    for d, dirs, files in os.walk(root):
        dirs.sort()
        small = []
        for f in sorted(files):
            p = os.path.join(d, f)
            if os.path.islink(p) or not os.path.isfile(p):
                raise Error("%s is not a regular file" % p)
            if os.path.getsize(p) <= BIG:
                small.append(p)
            else:
                out.append((_xz_size([p]), [p]))
        for dname in dirs:
            if os.path.islink(os.path.join(d, dname)):
                raise Error("%s is a link" % os.path.join(d, dname))
        if small:
            out.extend(_group(small, cap // 2))
    return [(n, [os.path.relpath(p, root) for p in ps]) for n, ps in out]


def plan(us, cap):
    """Units into parts: largest first, each into the first part with room."""
    parts = []
    for n, ps in sorted(us, key=lambda u: -u[0]):
        if n > cap:
            raise Error("%s alone is %d bytes xz, over %d: no part can hold it" % (ps[0], n, cap))
        for part in parts:
            if part[0] + n <= cap:
                part[0] += n
                part[1].extend(ps)
                break
        else:
            parts.append([n, list(ps)])
    return [sorted(p[1]) for p in parts]


def write(root, out, cap, name="part"):
    if cap < 100000:
        raise Error("a part of %d bytes is too small" % cap)
    if not os.path.isdir(root):
        raise Error("no folder %s" % root)
    parts = plan(units(root, cap), int(cap * 0.97))
    if os.path.isdir(out):
        for old in os.listdir(out):
            if old.startswith("p") and old[1:].isdigit():
                shutil.rmtree(os.path.join(out, old))
    sizes = []
    for i, files in enumerate(parts, 1):
        d = os.path.join(out, "p%d" % i)
        os.makedirs(d)
        path = os.path.join(d, name + ".tar.xz")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:xz", preset=PRESET) as t:
            for rel in files:
                t.add(os.path.join(root, rel), arcname=rel, recursive=False)
        if buf.tell() > cap:
            raise Error("part %d came out at %d bytes, over %d: pass a smaller BYTES" % (i, buf.tell(), cap))
        with open(path, "wb") as f:
            f.write(buf.getvalue())
        sizes.append((path, buf.tell(), len(files)))
    return sizes


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__.split("\n\n")[1])
    try:
        cap = int(sys.argv[3])
        for path, n, k in write(sys.argv[1], sys.argv[2], cap, sys.argv[4] if len(sys.argv) == 5 else "part"):
            print("%s: %d bytes, %d files" % (path, n, k))
    except ValueError:
        sys.exit("pack_parts: BYTES must be a whole number (got %s)" % sys.argv[3])
    except Error as e:
        sys.exit("pack_parts: %s" % e)


if __name__ == "__main__":
    main()
