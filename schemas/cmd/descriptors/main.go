// Command descriptors writes the modules' FOLIO module descriptors and
// OpenAPI descriptions, generated from the permission table in package
// schemas, into circulation/descriptors and circulation-storage/descriptors,
// and the README's permission table (make descriptors runs it). Run it from the repository's root after
// changing a route or a permission:
//
//	go run ./schemas/cmd/descriptors
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/checkoutlock/schemas"
)

func main() {
	for _, service := range []string{schemas.ServiceCirculation, schemas.ServiceStorage, schemas.ServiceSIP2} {
		dir := filepath.Join(service, "descriptors")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		path := filepath.Join(dir, "ModuleDescriptor-template.json")
		if err := os.WriteFile(path, schemas.Descriptor(service), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("wrote", path)
		if len(schemas.RoutesOf(service)) == 0 {
			continue
		}
		path = filepath.Join(dir, "openapi.json")
		if err := os.WriteFile(path, schemas.OpenAPI(service), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("wrote", path)
	}
	readme, err := os.ReadFile("docs/security.md")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	begin := strings.Index(string(readme), schemas.PermissionsBegin)
	end := strings.Index(string(readme), schemas.PermissionsEnd)
	if begin < 0 || end < begin {
		fmt.Fprintln(os.Stderr, "docs/security.md has no permission table markers")
		os.Exit(1)
	}
	out := string(readme[:begin]) + schemas.PermissionsBegin + "\n\n" + schemas.PermissionsMarkdown() + "\n" + string(readme[end:])
	if err := os.WriteFile("docs/security.md", []byte(out), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("wrote the permission table in docs/security.md")
}
