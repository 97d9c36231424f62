"""lifetime_lint.py refuses each way a reference can outlive the temporary
it reads, and passes the forms that keep the temporary alive."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import lifetime_lint  # noqa: E402


def flagged(source):
    return list(lifetime_lint.check("case.cc", source))


class LifetimeLint(unittest.TestCase):
    def test_refuses_a_range_read_through_a_call(self):
        for line in ["for (const Model& m : snapshot()->models) {}",
                     "for (const Row& r : *Load(path)) {}",
                     "for (int v : Table()[3]) {}",
                     "for (int v : Make().value()) {}",
                     "for (int v : Make<int>(1).front()) {}",
                     "for (const auto& [a, b] : registry.Read(x, y)->refused) {}"]:
            with self.subTest(line=line):
                self.assertEqual(len(flagged("void f() {\n  " + line + "\n}\n")), 1)

    def test_refuses_a_reference_declared_through_a_call(self):
        for line in ["const auto& info = registry.Find(\"padded\")->info;",
                     "const Row& r = *Load(path);",
                     "auto&& x = Values().at(2);"]:
            with self.subTest(line=line):
                self.assertEqual(len(flagged("void f() {\n  " + line + "\n}\n")), 1)

    def test_names_the_line(self):
        self.assertEqual(flagged("void f() {\n\n  for (int v : T()[0]) {}\n}\n"),
                         ["case.cc:3: T()[0]"])

    def test_passes_what_keeps_the_temporary_alive(self):
        source = """void f() {
  const std::shared_ptr<const Snapshot> s = snapshot();
  for (const Model& m : s->models) {}
  for (const auto& [line, reason] : registry.Scan().refused) {}
  const auto& refused = registry.Scan().refused;
  for (auto it = m.begin(); it != m.end(); ++it) {}
  const auto& e = offers[name].begin()->second;
  const auto& g = groups.find(key)->second;
  bool both = a && b == c;
  int& n = counts[key];
  // for (const Model& m : snapshot()->models) is what the lint refuses
  const char* text = "for (x : f()->y)";
}
"""
        self.assertEqual(flagged(source), [])

    def test_a_lifetime_comment_says_why_a_pointer_lives_on(self):
        self.assertEqual(flagged("void f() {\n  const A& a = *Find(\"x\");  // lifetime: static\n"
                                 "  // lifetime: descriptors live as long as the process.\n"
                                 "  const D& d = *Descriptor();\n}\n"), [])


if __name__ == "__main__":
    unittest.main()
