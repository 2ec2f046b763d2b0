# The job rsharvest's baseline does, written plainly in Python, one process
# per package (the bench's "python job" rows): download the package, inflate
# every entry, check it against manifest.xml — its length, and its strongest
# digest (VERIFY "strongest", as rsharvest does by default) or every digest
# it lists ("all", as rsharvest --verify all) — and write it to a file.
# Usage: pyjob.py VERIFY BASE_URL OUT_DIR PACKAGE...
import concurrent.futures, hashlib, io, os, sys, urllib.request, zipfile
import xml.etree.ElementTree as ET

RS = "{http://www.openarchives.org/rs/terms/}"
STRENGTH = ["sha-512", "sha-256", "sha-1", "md5"]
HASHLIB = {"sha-512": "sha512", "sha-256": "sha256", "sha-1": "sha1", "md5": "md5"}


def job(verify, base, out, name):
    with urllib.request.urlopen(base + "packages/" + name) as r:
        z = zipfile.ZipFile(io.BytesIO(r.read()))
    want = {}
    for md in ET.fromstring(z.read("manifest.xml")).iter(RS + "md"):
        if md.get("path"):
            want[md.get("path").lstrip("/")] = md
    for i in z.infolist():
        if i.filename == "manifest.xml":
            continue
        md = want[i.filename]
        listed = dict(x.split(":", 1) for x in md.get("hash").split())
        algs = [a for a in STRENGTH if a in listed]
        if verify == "strongest":
            algs = algs[:1]
        hs, n = [hashlib.new(HASHLIB[a]) for a in algs], 0
        path = os.path.join(out, i.filename)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with z.open(i) as src, open(path, "wb") as dst:
            while b := src.read(1 << 18):
                for h in hs:
                    h.update(b)
                n += len(b)
                dst.write(b)
        if int(md.get("length")) != n or any(listed[a] != h.hexdigest() for a, h in zip(algs, hs)):
            raise SystemExit(f"{name}: {i.filename}: fixity mismatch")
    return len(z.infolist()) - 1


if __name__ == "__main__":
    verify, base, out, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    if verify not in ("strongest", "all"):
        raise SystemExit("usage: pyjob.py strongest|all BASE_URL OUT_DIR PACKAGE...")
    with concurrent.futures.ProcessPoolExecutor(os.cpu_count()) as pool:
        n = len(names)
        print(sum(pool.map(job, [verify] * n, [base] * n, [out] * n, names)))
