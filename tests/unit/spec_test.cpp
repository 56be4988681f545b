// Spec grammar, canonical spelling and the registry's validation messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kvtune/error.h"
#include "kvtune/spec.h"
#include "test_support.h"

namespace kvtune {
namespace {

using ::testing::HasSubstr;
using testing::make_scheme;

std::string spec_error(const std::string& spec) {
  try {
    make_scheme(spec);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Spec, ParsesFamilyKeysAndFlags) {
  const ParsedSpec p = parse_spec(" int : bits=4, axis=channel ,asym ");
  EXPECT_EQ(p.family, "int");
  ASSERT_EQ(p.params.size(), 3u);
  EXPECT_EQ(p.params[0].first, "bits");
  EXPECT_EQ(p.params[0].second, "4");
  EXPECT_EQ(p.params[1].second, "channel");
  EXPECT_EQ(p.params[2].first, "asym");
  EXPECT_FALSE(p.params[2].second.has_value());
  EXPECT_EQ(parse_spec("q8_0").params.size(), 0u);
}

TEST(Spec, RejectsMalformedSpecs) {
  EXPECT_THROW(parse_spec(""), InputError);
  EXPECT_THROW(parse_spec(":bits=4"), InputError);
  EXPECT_THROW(parse_spec("int:bits=4,,axis=token"), InputError);
  EXPECT_THROW(parse_spec("int:bits=4,bits=5"), InputError);
  EXPECT_THROW(parse_spec("int:=4"), InputError);
}

TEST(Spec, CanonicalSpellingRoundTrips) {
  EXPECT_EQ(make_scheme("int")->spec(), "int:bits=8,axis=tensor");
  EXPECT_EQ(make_scheme("int:axis=channel,bits=4")->spec(), "int:bits=4,axis=channel");
  EXPECT_EQ(make_scheme("int:asym,group=32,axis=channel,bits=2,scale=f16")->spec(),
            "int:bits=2,axis=channel,group=32,asym,scale=f16");
  EXPECT_EQ(make_scheme("int:bits=8,scale=f32")->spec(), "int:bits=8,axis=tensor");  // default omitted
  EXPECT_EQ(make_scheme("none")->spec(), "none");
  for (const std::string spec : {"int:bits=3,axis=token,group=16,asym,scale=bf16", "f16", "bf16", "f32"}) {
    EXPECT_EQ(make_scheme(make_scheme(spec)->spec())->spec(), make_scheme(spec)->spec());
  }
}

TEST(Spec, UnknownFamilyListsTheValidOnes) {
  const std::string e = spec_error("int9:bits=4");
  EXPECT_THAT(e, HasSubstr("unknown scheme 'int9'"));
  EXPECT_THAT(e, HasSubstr("valid ones are: "));
  for (const std::string& name : builtin_registry().names()) EXPECT_THAT(e, HasSubstr(name));
}

TEST(Spec, UnknownParameterListsTheValidOnes) {
  const std::string e = spec_error("int:bits=4,foo=1");
  EXPECT_THAT(e, HasSubstr("unknown parameter 'foo'"));
  EXPECT_THAT(e, HasSubstr("bits (2..8)"));
  EXPECT_THAT(e, HasSubstr("axis (tensor|channel|token)"));
  EXPECT_THAT(spec_error("f16:bits=4"), HasSubstr("valid ones are: rotation (none|hadamard|random|rht)"));
}

TEST(Spec, BadValuesNameTheDomain) {
  EXPECT_THAT(spec_error("int:bits=9"), HasSubstr("'bits' = '9' is not valid; expected 2..8"));
  EXPECT_THAT(spec_error("int:bits=four"), HasSubstr("expected 2..8"));
  EXPECT_THAT(spec_error("int:axis=row"), HasSubstr("expected tensor|channel|token"));
  EXPECT_THAT(spec_error("int:asym=yes"), HasSubstr("'asym' is a flag"));
  EXPECT_THAT(spec_error("int:bits"), HasSubstr("needs a value"));
  EXPECT_THAT(spec_error("int:group=32"), HasSubstr("'group' needs axis=channel"));
}

TEST(Registry, RefusesDuplicateNamesNamingBothOrigins) {
  Registry r;
  FamilyInfo a;
  a.name = "dup";
  a.origin = "first.so";
  a.make = [](const SchemeParams&) -> SchemePtr { return nullptr; };
  FamilyInfo b = a;
  b.origin = "second.so";
  r.add(a);
  try {
    r.add(b);
    FAIL() << "duplicate accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("second.so"));
    EXPECT_THAT(e.what(), HasSubstr("first.so"));
  }
}

TEST(Registry, BuiltinsRecordWhereTheyWereRegistered) {
  const FamilyInfo* f = builtin_registry().find("int");
  ASSERT_NE(f, nullptr);
  EXPECT_THAT(f->origin, HasSubstr("plugins/int/int_family.cpp:"));
}

}  // namespace
}  // namespace kvtune
