#!/usr/bin/env python3
"""Puts the source tarballs that the wraps name into subprojects/packagecache/,
through apt: `apt-get source --download-only --tar-only PACKAGE=VERSION` of
the Debian source package each wrap names in its `# debian-source:` line.
apt checks each tarball against the signed Sources index, meson against the
wrap's source_hash. Afterwards `meson setup --wrap-mode=forcefallback` needs
no network.

Nothing in /etc/apt changes: the deb-src entries, their index and apt's
caches live in a temporary folder. They point at the mirror and keyring of
the system's Debian entry, for the suites below (the pinned versions are
spread over them: the mirror need not hold every suite's tarballs).
Usage: subprojects/fetch-debian-sources.py [wrap names...] (default: all)."""
import glob
import os
import re
import subprocess
import sys
import tempfile

SUITES = ["bookworm", "trixie", "sid"]
HERE = os.path.dirname(os.path.abspath(__file__))


def debian_entry():
    """(URI, Signed-By or None) of the system's main Debian archive entry."""
    entries = []  # (types, uris, suites, signed_by)
    for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        for stanza in re.split(r"\n\s*\n", open(path).read()):
            fields = {}
            for line in stanza.splitlines():
                m = re.match(r"^([A-Za-z-]+):\s*(.*)$", line)
                if m:
                    fields[m.group(1).lower()] = m.group(2).split()
            if fields.get("enabled", ["yes"])[0] == "no":
                continue
            entries.append((fields.get("types", []), fields.get("uris", []), fields.get("suites", []),
                            (fields.get("signed-by") or [None])[0]))
    for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
        if not os.path.exists(path):
            continue
        for line in open(path):
            m = re.match(r"^\s*(deb|deb-src)\s+(\[[^]]*\]\s+)?(\S+)\s+(\S+)", line)
            if m:
                signed = re.search(r"signed-by=(\S+?)[\s\]]", m.group(2) or "")
                entries.append(([m.group(1)], [m.group(3)], [m.group(4)], signed and signed.group(1)))
    for types, uris, suites, signed_by in entries:
        # the archive itself: a suite without -security / -updates / -backports
        if uris and "deb" in types and any(s in SUITES for s in suites) \
                and not any("security" in u for u in uris):
            return uris[0], signed_by
    sys.exit("fetch-debian-sources: no Debian archive entry in /etc/apt")


def wanted(names):
    """[(wrap name, source package, version, tarball)] from the wraps."""
    out = []
    for wrap in sorted(glob.glob(os.path.join(HERE, "*.wrap"))):
        name = os.path.basename(wrap)[:-5]
        if names and name not in names:
            continue
        text = open(wrap).read()
        src = re.search(r"^# debian-source:\s*(\S+)\s+(\S+)\s*$", text, re.M)
        tar = re.search(r"^source_filename\s*=\s*(\S+)", text, re.M)
        if src and tar:
            out.append((name, src.group(1), src.group(2), tar.group(1)))
    return out


def main():
    todo = wanted(sys.argv[1:])
    cache = os.path.join(HERE, "packagecache")
    os.makedirs(cache, exist_ok=True)
    todo = [t for t in todo if not os.path.exists(os.path.join(cache, t[3]))]
    if not todo:
        print("fetch-debian-sources: packagecache/ has every tarball")
        return
    uri, signed_by = debian_entry()
    with tempfile.TemporaryDirectory() as tmp:
        parts = os.path.join(tmp, "sources.list.d")
        for d in (parts, os.path.join(tmp, "lists", "partial"), os.path.join(tmp, "cache", "archives", "partial")):
            os.makedirs(d)
        with open(os.path.join(parts, "clattn-deb-src.sources"), "w") as f:
            f.write("Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\n" % (uri, " ".join(SUITES)))
            if signed_by:
                f.write("Signed-By: %s\n" % signed_by)
        apt = ["-o", "Dir::Etc::SourceList=/dev/null", "-o", "Dir::Etc::SourceParts=" + parts,
               "-o", "Dir::State::Lists=" + os.path.join(tmp, "lists"),
               "-o", "Dir::Cache=" + os.path.join(tmp, "cache"), "-o", "Debug::NoLocking=1"]
        subprocess.run(["apt-get"] + apt + ["-q", "update"], check=True)
        pins = ["%s=%s" % (pkg, ver) for _, pkg, ver, _ in todo]
        subprocess.run(["apt-get"] + apt + ["-q", "source", "--download-only", "--tar-only"] + pins,
                       cwd=cache, check=True)
    missing = [t[3] for t in todo if not os.path.exists(os.path.join(cache, t[3]))]
    if missing:
        sys.exit("fetch-debian-sources: not fetched: " + " ".join(missing))
    print("fetch-debian-sources: fetched " + " ".join(t[3] for t in todo))


if __name__ == "__main__":
    main()
