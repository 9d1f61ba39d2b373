package configure

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"

	"berth.dev/berth/platform"
)

// StatePath is where berth records what it owns, relative to the host root.
const StatePath = "var/lib/berth/config-state.json"

// BackupDir holds the original of every file berth modified.
const BackupDir = "var/lib/berth/backups"

const stateVersion = 1

// State is what berth owns on a host: per handler the files and blocks it
// wrote, and per modified file its backup.
type State struct {
	Version   int                      `json:"version"`
	Platforms map[string]PlatformState `json:"platforms"`
	Backups   map[string]Backup        `json:"backups,omitempty"`
	// Dirs are the directories berth created, removed once empty.
	Dirs []string `json:"dirs,omitempty"`
}

// addDirs records directories berth created.
func (st *State) addDirs(dirs []string) {
	for _, d := range dirs {
		if !slices.Contains(st.Dirs, d) {
			st.Dirs = append(st.Dirs, d)
		}
	}
	slices.Sort(st.Dirs)
}

// PlatformState is what one applied platform owns.
type PlatformState struct {
	Platform string      `json:"platform"`
	Files    []OwnedFile `json:"files"`
	// Layout is a custom distribution's runtime layout as applied: remove
	// and restart take the unit and socket from it.
	Layout *platform.Layout `json:"layout,omitempty"`
	// Suffix is the install suffix the handler was applied with (empty:
	// the unsuffixed install), so that remove --all of one install leaves
	// the other's handlers.
	Suffix string `json:"suffix,omitempty"`
}

// OwnedFile is one file or block berth wrote for a platform.
type OwnedFile struct {
	Path  string `json:"path"`
	Kind  Kind   `json:"kind"`
	Block string `json:"block,omitempty"`
}

// Backup is the state of a file before berth first changed it.
type Backup struct {
	// Existed is false when berth created the file; Created is then the
	// base it created it from, so that the last remove deletes it.
	Existed bool   `json:"existed"`
	Path    string `json:"path,omitempty"`
	Mode    uint32 `json:"mode,omitempty"`
	Created string `json:"created,omitempty"`
}

func loadState(fsys FS) (*State, error) {
	data, err := fsys.ReadFile(StatePath)
	if errors.Is(err, fs.ErrNotExist) {
		return &State{Version: stateVersion, Platforms: map[string]PlatformState{}, Backups: map[string]Backup{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", StatePath, err)
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("%s: %w (move it away only if nothing berth wrote is left on this host)", StatePath, err)
	}
	if st.Version != stateVersion {
		return nil, fmt.Errorf("%s: state version %d, expected %d", StatePath, st.Version, stateVersion)
	}
	if st.Platforms == nil {
		st.Platforms = map[string]PlatformState{}
	}
	if st.Backups == nil {
		st.Backups = map[string]Backup{}
	}
	return &st, nil
}

func (st *State) marshal() []byte {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("configure: state: %v", err))
	}
	return append(b, '\n')
}

// owns reports whether some platform owns path as a whole file.
func (st *State) owns(p string) bool {
	for _, ps := range st.Platforms {
		for _, f := range ps.Files {
			if f.Path == p && f.Kind == Owned {
				return true
			}
		}
	}
	return false
}

// Handlers lists the applied handlers, sorted.
func (st *State) Handlers() []string { return slices.Sorted(maps.Keys(st.Platforms)) }

// LoadState reads the state file of a host root (an empty state when
// berth never applied anything there).
func LoadState(fsys FS) (*State, error) { return loadState(fsys) }
