package harvest

import (
	"os"
	"regexp"
)

// envRef is a reference to an environment variable in a setting's value:
// ${NAME}. The bare $NAME form is not one: a secret may hold a dollar.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandEnv resolves the ${NAME} references in a header value or a sink
// spec from the environment, at harvest time: a site's credentials can
// live in the daemon's environment (a systemd EnvironmentFile, say) rather
// than in the registry, which keeps the reference as written. A variable
// that is not set is an error naming it (what names the value, never the
// value itself).
func expandEnv(what, s string) (string, error) {
	var missing string
	out := envRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := envRef.FindStringSubmatch(ref)[1]
		v, ok := os.LookupEnv(name)
		if !ok && missing == "" {
			missing = name
		}
		return v
	})
	if missing != "" {
		return "", invalidf("%s: ${%s} is not set in the environment", what, missing)
	}
	return out, nil
}
