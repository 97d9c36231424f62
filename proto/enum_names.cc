#include "proto/enum_names.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_replace.h"

namespace kmt {
namespace {

// What every value's name of `e` starts with, up to its last '_'.
absl::string_view SharedPrefix(const google::protobuf::EnumDescriptor& e) {
  absl::string_view prefix = e.value(0)->name();
  for (int i = 1; i < e.value_count(); ++i) {
    const absl::string_view name = e.value(i)->name();
    size_t n = 0;
    while (n < prefix.size() && n < name.size() && prefix[n] == name[n]) ++n;
    prefix = prefix.substr(0, n);
  }
  const size_t last = prefix.rfind('_');
  return last == absl::string_view::npos ? absl::string_view() : prefix.substr(0, last + 1);
}

}  // namespace

std::string EngineName(const google::protobuf::EnumDescriptor& e, int number) {
  const google::protobuf::EnumValueDescriptor* value = e.FindValueByNumber(number);
  if (value == nullptr) return "";
  std::string name(absl::string_view(value->name()).substr(SharedPrefix(e).size()));
  name = absl::StrReplaceAll(name, {{"_PLUS", "+"}});
  name = absl::StrReplaceAll(name, {{"_", "-"}});
  absl::AsciiStrToLower(&name);
  return name;
}

const google::protobuf::EnumValueDescriptor* FindByEngineName(
    const google::protobuf::EnumDescriptor& e, absl::string_view name) {
  for (int i = 0; i < e.value_count(); ++i) {
    if (EngineName(e, e.value(i)->number()) == name) return e.value(i);
  }
  return nullptr;
}

}  // namespace kmt
