package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/nats-io/nkeys"
)

// File names in a Store's directory.
const (
	SeedExt      = ".nk"             // NAME.nk: the identity's nkey seed
	issuedFile   = "issued.json"     // identities issued for outside tools
	dirMode      = 0o700             // the creds directory
	fileMode     = 0o600             // every file in it
	CredsDirName = "creds"           // DATA_DIR/creds
	confFileName = "nats-auth.conf"  // DATA_DIR/creds/nats-auth.conf
	issuedHeader = "vera identities" // a marker in issued.json
)

// Store keeps the identities of one VERA bus in a directory.
type Store struct {
	Dir string
}

// DirOf returns the creds directory of a VERA data dir: DATA_DIR/creds.
func DirOf(dataDir string) string { return filepath.Join(dataDir, CredsDirName) }

// Path is the seed file of identity name.
func (s Store) Path(name string) string { return filepath.Join(s.Dir, name+SeedExt) }

// ConfPath is where Init writes the nats.conf authorization block.
func (s Store) ConfPath() string { return filepath.Join(s.Dir, confFileName) }

// Init makes the directory (0700) and a seed for every built-in identity
// that has none yet, and writes the server configuration block
// (ConfPath). It is idempotent: existing seeds are kept, so clients keep
// working across restarts. It returns every identity, built-in and issued.
func (s Store) Init() ([]Identity, error) {
	if err := s.ensureDir(); err != nil {
		return nil, err
	}
	for _, id := range BuiltIn() {
		if _, err := s.seed(id.Name, true); err != nil {
			return nil, err
		}
	}
	ids, err := s.Identities()
	if err != nil {
		return nil, err
	}
	conf, err := Config(ids)
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(s.ConfPath(), []byte(conf)); err != nil {
		return nil, err
	}
	return ids, nil
}

// Identities returns the built-in identities that have a seed here and the
// issued ones, with their public keys.
func (s Store) Identities() ([]Identity, error) {
	var out []Identity
	for _, id := range BuiltIn() {
		kp, err := s.seed(id.Name, false)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if id.PublicKey, err = kp.PublicKey(); err != nil {
			return nil, fmt.Errorf("identity %s: %w", id.Name, err)
		}
		out = append(out, id)
	}
	issued, err := s.issued()
	if err != nil {
		return nil, err
	}
	return append(out, issued...), nil
}

// Issue makes a new identity for an outside tool (role RoleReader or
// RoleExt) or for a sandbox daemon started with --id name (RoleSandboxd),
// and returns it with the path of its seed file. A running embedded
// server picks it up on its next reload (see embedded.Server).
func (s Store) Issue(name string, role Role) (Identity, string, error) {
	if err := ValidateIssued(name, role); err != nil {
		return Identity{}, "", err
	}
	if err := s.ensureDir(); err != nil {
		return Identity{}, "", err
	}
	issued, err := s.issued()
	if err != nil {
		return Identity{}, "", err
	}
	if slices.ContainsFunc(issued, func(id Identity) bool { return id.Name == name }) {
		return Identity{}, "", fmt.Errorf("identity %q exists already (revoke it first to issue a new key)", name)
	}
	kp, err := s.seed(name, true)
	if err != nil {
		return Identity{}, "", err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return Identity{}, "", err
	}
	id := Identity{Name: name, Role: role, PublicKey: pub}
	if err := s.writeIssued(append(issued, id)); err != nil {
		return Identity{}, "", err
	}
	return id, s.Path(name), s.refreshConf()
}

// Revoke removes an issued identity and its seed.
func (s Store) Revoke(name string) error {
	issued, err := s.issued()
	if err != nil {
		return err
	}
	i := slices.IndexFunc(issued, func(id Identity) bool { return id.Name == name })
	if i < 0 {
		if _, ok := builtInRole(name); ok {
			return fmt.Errorf("%q is a built-in identity: it cannot be revoked (delete %s and restart to give it a new key)", name, s.Path(name))
		}
		return fmt.Errorf("no issued identity %q", name)
	}
	if err := s.writeIssued(slices.Delete(issued, i, i+1)); err != nil {
		return err
	}
	if err := os.Remove(s.Path(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", s.Path(name), err)
	}
	return s.refreshConf()
}

func (s Store) refreshConf() error {
	ids, err := s.Identities()
	if err != nil {
		return err
	}
	conf, err := Config(ids)
	if err != nil {
		return err
	}
	return writeFileAtomic(s.ConfPath(), []byte(conf))
}

// ensureDir makes the directory with mode 0700 and refuses one that other
// users can read or write: the seeds are the keys to the bus.
func (s Store) ensureDir() error {
	if s.Dir == "" {
		return errors.New("auth: no creds directory")
	}
	if err := os.MkdirAll(s.Dir, dirMode); err != nil {
		return fmt.Errorf("creds directory %s: %w", s.Dir, err)
	}
	st, err := os.Lstat(s.Dir)
	if err != nil {
		return fmt.Errorf("creds directory %s: %w", s.Dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("creds directory %s is not a directory (a symlink?): remove it and start again", s.Dir)
	}
	if uid, ok := ownerOf(st); ok && uid != os.Geteuid() {
		return fmt.Errorf("creds directory %s belongs to uid %d, not to you (uid %d): another user could read or plant keys there; use a data dir of your own", s.Dir, uid, os.Geteuid())
	}
	if st.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(s.Dir, dirMode); err != nil {
			return fmt.Errorf("creds directory %s is open to other users (mode %o) and cannot be closed: %w", s.Dir, st.Mode().Perm(), err)
		}
	}
	return nil
}

// seed reads identity name's seed, creating it when create is set and it
// does not exist.
func (s Store) seed(name string, create bool) (nkeys.KeyPair, error) {
	path := s.Path(name)
	b, err := os.ReadFile(path)
	if err == nil {
		if st, serr := os.Stat(path); serr == nil && st.Mode().Perm()&0o077 != 0 {
			_ = os.Chmod(path, fileMode)
		}
		kp, err := nkeys.ParseDecoratedNKey(b)
		if err != nil {
			return nil, fmt.Errorf("identity %s: %s is not an nkey seed: %w", name, path, err)
		}
		return kp, nil
	}
	if !errors.Is(err, fs.ErrNotExist) || !create {
		return nil, fmt.Errorf("identity %s: %w", name, err)
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("identity %s: create nkey: %w", name, err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(path, append(seed, '\n')); err != nil {
		return nil, err
	}
	return kp, nil
}

type issuedDoc struct {
	Comment    string     `json:"comment"`
	Identities []Identity `json:"identities"`
}

func (s Store) issued() ([]Identity, error) {
	b, err := os.ReadFile(filepath.Join(s.Dir, issuedFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("issued identities: %w", err)
	}
	var doc issuedDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("issued identities %s: %w", filepath.Join(s.Dir, issuedFile), err)
	}
	for _, id := range doc.Identities {
		if err := ValidateIssued(id.Name, id.Role); err != nil {
			return nil, fmt.Errorf("issued identities: %w", err)
		}
		if !nkeys.IsValidPublicUserKey(id.PublicKey) {
			return nil, fmt.Errorf("issued identity %s: bad public key", id.Name)
		}
	}
	return doc.Identities, nil
}

func (s Store) writeIssued(ids []Identity) error {
	b, err := json.MarshalIndent(issuedDoc{Comment: issuedHeader + ": issued for outside tools and sandbox daemons by `vera auth issue`", Identities: ids}, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(s.Dir, issuedFile), append(b, '\n'))
}

// writeFileAtomic writes data to path with mode 0600 through a temporary
// file, so that a reader never sees half a seed.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(fileMode); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
