package state

import "net/url"

// SourceKey is the name of the source at raw in the state — and in the
// logs, the reports and everything published: the URL without its password (a URL
// with credentials, https://user:secret@host/, is https://user@host/).
// What is not a URL is returned as it is.
func SourceKey(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, has := u.User.Password(); has {
		u.User = url.User(u.User.Username())
	}
	return u.String()
}
