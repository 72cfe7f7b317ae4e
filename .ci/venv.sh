# Sourced by .ci/k8s.sh and .ci/phoenix.sh: tool venvs beside the app's, each installing its input
# (requirements/X.txt) constrained by its lock (requirements/lock/X.txt, a `pip freeze` of a venv
# that passed), so a new upstream release of a transitive dependency cannot change what CI runs;
# an input pin the lock does not match fails the install loudly. With relock=1 the venv is
# reinstalled without the lock and the lock rewritten from what resolved.
PY=${PY:-python3}
relock=${relock:-0}
venv() {  # venv DIR NAME: (re)build when its input or lock is newer than the stamp
  local dir=$1 input=requirements/$2.txt lock=requirements/lock/$2.txt constraint=()
  [ "$relock" = 1 ] || constraint=(-c "$lock")
  if [ "$relock" = 1 ] || [ ! -f "$dir/.installed" ] || [ "$input" -nt "$dir/.installed" ] || [ "$lock" -nt "$dir/.installed" ]; then
    rm -rf "$dir"
    "$PY" -m venv "$dir"
    "$dir/bin/pip" install --quiet --disable-pip-version-check -r "$input" "${constraint[@]}" >"/tmp/venv-pip-$2.log" 2>&1 \
      || { tail -50 "/tmp/venv-pip-$2.log"; return 1; }
    if [ "$relock" = 1 ]; then
      { echo "# pip freeze of $dir (requirements/$2.txt) as installed with relock; edit the"
        echo "# input and relock rather than this file. The venv installs the input constrained by it."
        "$dir/bin/pip" freeze --disable-pip-version-check; } > "$lock"
    fi
    touch "$dir/.installed"
  fi
}
