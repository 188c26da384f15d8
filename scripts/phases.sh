# Sourced by .ci/run and the scripts it calls: `phase NAME command...` runs a command and notes how
# long it took; the notes are printed when the script exits, whether it succeeded or not.
attn_phases=()
phase() {
  local name=$1 start=$SECONDS
  shift
  "$@"
  attn_phases+=("$(printf '%-40s %6d s' "$name" $((SECONDS - start)))")
}
attn_print_phases() {
  local status=$?
  if ((${#attn_phases[@]})); then
    printf '\n%s: time by phase%s\n' "$attn_script" "$( ((status == 0)) || echo " (stopped by a failure)")"
    printf '  %s\n' "${attn_phases[@]}"
  fi
}
attn_script=$(basename "$0")
trap attn_print_phases EXIT
