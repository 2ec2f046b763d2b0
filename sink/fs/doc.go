// Package fs is the filesystem sink, "--sink fs:DIR": it mirrors every
// resource as one regular file under DIR, at a path computed from the
// resource's URI alone, so the mirror can be browsed, served or copied with
// ordinary tools.
//
// # Layout
//
// A URI of the form "scheme://rest" is a URL. Its rest is cut at the first
// "?" or "#"; the part before is split at every "/". The first piece is the
// authority (host, port, user information), the others are the path
// segments. The scheme, the authority and every path segment but the last
// become one directory level each; the last segment, with the query and
// fragment (everything from the "?" or "#" on), becomes the file name. A
// URL without a path ("http://example.com") has the authority as its last
// piece, so its file sits in the scheme's directory.
//
// Any other string ("urn:x:y", "", a relative reference, arbitrary bytes)
// is written whole as one file name under the top-level directory "_other".
//
// Names are written as they are, except:
//
//   - Every file name starts with "@", and a literal "@" at the start of any
//     name is written "%40", so a directory's name never starts with "@"
//     (except the pieces of a cut file name, below). Thus ".../a" (file
//     "@a") and ".../a/b" (directory "a", file "@b") are held at once, and
//     ".../a/" is the file "@" in directory "a".
//   - These bytes are written as "%" and two upper-case hex digits: "%",
//     "/" (in a query, fragment or non-URL string), the Windows-reserved and
//     shell-special characters \ " * < > |, control characters (00-1F, 7F
//     and the UTF-8 encodings of U+0080-U+009F), and every byte that is not
//     part of valid UTF-8. Everything else is kept: letters, digits, spaces,
//     non-ASCII text, and "-._~?&=:;,+!$'()[]#" and the like.
//   - A directory for an empty piece is named "%", for "." "%2E", and for
//     ".." "%2E%2E". No URI can therefore escape DIR or collide with
//     another: "http://h/x/../y" is "http/h/x/%2E%2E/@y", not "http/h/@y".
//   - A scheme that begins, in any case, with "records.sqlite" (the packed
//     layout's database, which names that begin so announce) has its first
//     letter escaped: "records.sqlite://h/a" is "%72ecords.sqlite/h/@a".
//   - A name longer than 255 bytes is cut into pieces of at most 254 bytes,
//     never inside an escape or a UTF-8 character, and each piece but the
//     last ends in "%" and is a directory holding the next piece. The last
//     piece is at least 3 bytes long.
//
// Scheme and authority are kept exactly as given, upper-case letters
// included: the mapping is reversible, "http" and "HTTP" are different
// directories, and http and https copies of one path are different
// resources. Decode turns a path back into its URI; Encode is the mapping.
//
// Examples (URI → path relative to DIR):
//
//	http://example.com/a/b.txt?x=1 → http/example.com/a/@b.txt?x=1
//	http://example.com/a → http/example.com/@a
//	http://example.com/a/ → http/example.com/a/@
//	http://example.com → http/@example.com
//	https://example.com:8443/docs/index.html → https/example.com:8443/docs/@index.html
//	http://example.com/sub dir/café über.txt → http/example.com/sub dir/@café über.txt
//	http://example.com/a%2Fb → http/example.com/@a%252Fb
//	http://example.com/q?path=/x/y#top → http/example.com/@q?path=%2Fx%2Fy#top
//	http://example.com/x/../y → http/example.com/x/%2E%2E/@y
//	http://example.com//a → http/example.com/%/@a
//	http://example.com/@user/@ → http/example.com/%40user/@%40
//	file:///etc/passwd → file/%/etc/@passwd
//	urn:isbn:0451450523 → _other/@urn:isbn:0451450523
//	../../etc/passwd → _other/@..%2F..%2Fetc%2Fpasswd
//
// # Writing
//
// Put streams the body into a new file in the sink's own temporary
// directory, DIR/.rsharvest-tmp/PID-RANDOM (same filesystem), sets its
// modification time to the resource's Lastmod when there is one, and
// renames it onto its path only after the body has ended with io.EOF, so a
// path never holds a partial body: a failed or cancelled Put leaves the
// previous file, or none. The own directory is locked (flock) while the
// sink is open and removed by Close. When a sink is opened, the
// directories whose lock is free — their process ended, by a crash or
// kill -9 too — are removed with what they hold; those of running
// processes are left alone. The sink's mark, the empty directory
// DIR/.rsharvest-tmp/%rsharvest-sink, stays: the Walk of a sink whose
// directory holds this one skips it (two sites' mirrors may nest). With Options.Fsync the file is synced before
// and its directory after the rename, with the parents of the directories
// created for it (and a Delete's directory after it), which adds safety
// against power loss at the cost of speed. Delete removes the file and
// then every directory it leaves empty, up to but never including DIR.
// Every operation goes through an os.Root, so even a symbolic link planted
// in DIR cannot lead outside it.
//
// # Packed layout
//
// With "fs:DIR?layout=packed" (Options.Layout, NewPacked) the sink holds
// every resource as a row of one SQLite database, DIR/records.sqlite,
// instead of a file: for sources of many small records, which cost a disk
// an inode, a directory entry and a block each as files. See Packed.
//
// # Limitations
//
// On case-insensitive filesystems (the macOS and Windows defaults) URIs
// that differ only in letter case, such as ".../A" and ".../a", map to the
// same file; on macOS, names that differ only in Unicode normalization
// collide too. Use a case-sensitive filesystem for sources that need it.
// Names keep ":" (ports) and "?" (queries), which Windows forbids, and
// filesystems with a name limit below 255 bytes (eCryptfs: 143) reject
// long names.
package fs
