#!/bin/sh
# The Containerfile's base images must be pinned by digest: a tag moves, and
# an image built twice from one commit would differ. Each argument is an
# image reference; one without @sha256:<64 hex> fails the build, naming the fix.
bad=0
for ref in "$@"; do
  digest=${ref##*@sha256:}
  if [ "$digest" = "$ref" ] || [ ${#digest} -ne 64 ] || [ -n "$(printf '%s' "$digest" | tr -d 0-9a-f)" ]; then
    tag=${ref%%@*}
    echo "base image $ref is not pinned by digest: pass it as $tag@sha256:<digest>" \
      "(the digest: skopeo inspect --format '{{.Digest}}' docker://$tag)" >&2
    bad=1
  fi
done
exit $bad
