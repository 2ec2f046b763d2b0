# Rewrites a ResourceSync dump package as another producer writes it, with
# Python's own zipfile and zlib (rsharvest bench --producer; see
# bench.GenOptions.Producer). Usage: repack.py PRODUCER SRC DST, where
# PRODUCER is one of
#   python-1  zipfile.ZipFile(..., ZIP_DEFLATED, compresslevel=1) on a file:
#             every entry deflated at level 1, sizes in the local headers,
#             manifest.xml first
#   python-6  the same at level 6 (zipfile's default)
#   java      as java.util.zip.ZipOutputStream writes (zlib level 6, as
#             Deflater's default): every entry followed by a data descriptor
#             (sizes after the data), manifest.xml last
import sys
import zipfile

producer, src, dst = sys.argv[1:4]
level = {"python-1": 1, "python-6": 6, "java": 6}[producer]


class Unseekable:
    """A file zipfile cannot seek: it writes data descriptors, as a stream
    writer such as Java's ZipOutputStream does."""

    def __init__(self, f):
        self.f = f

    def write(self, b):
        return self.f.write(b)

    def flush(self):
        self.f.flush()

    def tell(self):
        raise OSError("unseekable")


with zipfile.ZipFile(src) as zin, open(dst, "wb") as raw:
    out = Unseekable(raw) if producer == "java" else raw
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=level) as zout:
        infos = zin.infolist()
        if producer == "java":
            infos = [i for i in infos if i.filename != "manifest.xml"] + [i for i in infos if i.filename == "manifest.xml"]
        for i in infos:
            zi = zipfile.ZipInfo(i.filename, date_time=i.date_time)
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi._compresslevel = level  # what ZipFile.open(name) would set
            with zin.open(i) as r, zout.open(zi, "w", force_zip64=i.file_size >= 1 << 31) as w:
                while True:
                    b = r.read(1 << 20)
                    if not b:
                        break
                    w.write(b)
