# The OAI-PMH harvest rsharvest's sync does, written plainly in Python (a
# yardstick of BenchmarkRecords): ListRecords (oai_dc) through its
# resumption tokens, one list at a time, each page parsed whole, each
# record's metadata written to a file of its own, named by its
# identifier's SHA-1. It prints the number of records written.
# Usage: oaijob.py BASE_URL OUT_DIR
import hashlib, os, sys, urllib.parse, urllib.request
import xml.etree.ElementTree as ET

OAI = "{http://www.openarchives.org/OAI/2.0/}"


def main(base, out):
    os.makedirs(out, exist_ok=True)
    query = {"verb": "ListRecords", "metadataPrefix": "oai_dc"}
    n = 0
    for _ in range(100000):  # a bound on the pages, as on every request loop
        with urllib.request.urlopen(base + "?" + urllib.parse.urlencode(query), timeout=60) as r:
            root = ET.parse(r).getroot()
        records = root.find(OAI + "ListRecords")
        if records is None:
            break
        for rec in records.iter(OAI + "record"):
            ident = rec.find(OAI + "header/" + OAI + "identifier").text
            md = rec.find(OAI + "metadata")
            body = b"".join(ET.tostring(c) for c in md) if md is not None else b""
            with open(os.path.join(out, hashlib.sha1(ident.encode()).hexdigest()), "wb") as f:
                f.write(body)
            n += 1
        token = records.find(OAI + "resumptionToken")
        if token is None or not (token.text or "").strip():
            break
        query = {"verb": "ListRecords", "resumptionToken": token.text.strip()}
    print(n)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
