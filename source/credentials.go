package source

import (
	"encoding/base64"
	"net/url"
)

// Credentials splits the credentials off the source URL raw: the URL to
// fetch, without them, and the Authorization header value they stand for
// (HTTP basic authentication; "" when raw has none).
func Credentials(raw string) (fetchURL, authorization string) {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw, ""
	}
	pass, _ := u.User.Password()
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pass))
	u.User = nil
	return u.String(), auth
}
