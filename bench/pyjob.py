# The job rsharvest's baseline does, written plainly in Python, one process
# per package (the bench's "python job" row): download the package, inflate
# every entry, check its md5, sha-256 and length against manifest.xml, and
# write it to a file. Usage: pyjob.py BASE_URL OUT_DIR PACKAGE...
import concurrent.futures, hashlib, io, os, sys, urllib.request, zipfile
import xml.etree.ElementTree as ET

RS = "{http://www.openarchives.org/rs/terms/}"


def job(base, out, name):
    with urllib.request.urlopen(base + "packages/" + name) as r:
        z = zipfile.ZipFile(io.BytesIO(r.read()))
    want = {}
    for md in ET.fromstring(z.read("manifest.xml")).iter(RS + "md"):
        if md.get("path"):
            want[md.get("path").lstrip("/")] = md
    for i in z.infolist():
        if i.filename == "manifest.xml":
            continue
        md5, sha, n = hashlib.md5(), hashlib.sha256(), 0
        path = os.path.join(out, i.filename)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with z.open(i) as src, open(path, "wb") as dst:
            while b := src.read(1 << 18):
                md5.update(b); sha.update(b); n += len(b)
                dst.write(b)
        md = want[i.filename]
        h = dict(x.split(":", 1) for x in md.get("hash").split())
        if h["md5"] != md5.hexdigest() or h["sha-256"] != sha.hexdigest() or int(md.get("length")) != n:
            raise SystemExit(f"{name}: {i.filename}: fixity mismatch")
    return len(z.infolist()) - 1


if __name__ == "__main__":
    base, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
    with concurrent.futures.ProcessPoolExecutor(os.cpu_count()) as pool:
        print(sum(pool.map(job, [base] * len(names), [out] * len(names), names)))
