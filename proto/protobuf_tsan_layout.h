// Included first in every ThreadSanitizer-built file of the project (see
// CMakeLists.txt). Protobuf's map fields gain two counters when
// __SANITIZE_THREAD__ is defined (google/protobuf/map_field.h), but Debian's
// libprotobuf and our generated code are built without ThreadSanitizer: code
// that saw the other layout would read a map field at the wrong offset (a
// crash in Map::operator[] on the first map written). Protobuf's headers here
// see the layout the library was built with; everything after them still sees
// __SANITIZE_THREAD__.
#ifndef KMT_PROTO_PROTOBUF_TSAN_LAYOUT_H_
#define KMT_PROTO_PROTOBUF_TSAN_LAYOUT_H_

#pragma push_macro("__SANITIZE_THREAD__")
#undef __SANITIZE_THREAD__
#include <google/protobuf/map_field.h>
#pragma pop_macro("__SANITIZE_THREAD__")

#endif  // KMT_PROTO_PROTOBUF_TSAN_LAYOUT_H_
