# cmake -DOUTPUT=<header> -DFILES=<a;b;...> -P source_digest.cmake
# Writes ATTN_BUILD_DIGEST, a SHA-256 over the given sources: the disk kernel cache treats an entry
# compiled by a build with other lowering or schedule code as stale. The header is rewritten only
# when the digest changes, so an unchanged tree rebuilds nothing.
set(all "")
foreach (f IN LISTS FILES)
  file(SHA256 "${f}" h)
  string(APPEND all "${h}")
endforeach ()
string(SHA256 digest "${all}")
string(SUBSTRING "${digest}" 0 16 digest)
set(text "#pragma once\n#define ATTN_BUILD_DIGEST \"${digest}\"\n")
if (EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
endif ()
if (NOT old STREQUAL text)
  file(WRITE "${OUTPUT}" "${text}")
endif ()
