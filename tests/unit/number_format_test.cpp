#include "reports/simple/number_format.h"

#include <gtest/gtest.h>

using lt::python_format_5;

// spec §4.3, "Verified examples" (Python's format(x, ".5"))
TEST(NumberFormat, SpecTable) {
  EXPECT_EQ(python_format_5(0.773434), "0.77343");
  EXPECT_EQ(python_format_5(5.773434), "5.7734");
  EXPECT_EQ(python_format_5(7.0), "7.0");
  EXPECT_EQ(python_format_5(39.62), "39.62");
  EXPECT_EQ(python_format_5(82.4776), "82.478");
  EXPECT_EQ(python_format_5(1234.5678), "1234.6");
  EXPECT_EQ(python_format_5(9999.94), "9999.9");
  EXPECT_EQ(python_format_5(9999.96), "1e+04");
  EXPECT_EQ(python_format_5(10000.0), "1e+04");
  EXPECT_EQ(python_format_5(12345.6), "1.2346e+04");
  EXPECT_EQ(python_format_5(0.0001), "0.0001");
  EXPECT_EQ(python_format_5(0.00012345678), "0.00012346");
  EXPECT_EQ(python_format_5(9.999951e-05), "0.0001");
  EXPECT_EQ(python_format_5(1.5e-05), "1.5e-05");
}

TEST(NumberFormat, MoreCases) {
  EXPECT_EQ(python_format_5(0.0), "0.0");
  EXPECT_EQ(python_format_5(100.0), "100.0");
  EXPECT_EQ(python_format_5(46.0), "46.0");
  EXPECT_EQ(python_format_5(1.25), "1.25");
  EXPECT_EQ(python_format_5(0.176), "0.176");
  EXPECT_EQ(python_format_5(9.99996), "10.0");
  EXPECT_EQ(python_format_5(3.3976e-05), "3.3976e-05");
  EXPECT_EQ(python_format_5(123456789.0), "1.2346e+08");
  EXPECT_EQ(python_format_5(1e-300), "1e-300");
  EXPECT_EQ(python_format_5(-2.5), "-2.5");
}

TEST(Fsum, ExactlyRounded) {
  EXPECT_EQ(lt::python_fsum({0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1}), 1.0);
  EXPECT_EQ(lt::python_fsum({1e100, 1.0, -1e100}), 1.0);
  EXPECT_EQ(lt::python_fsum({}), 0.0);
  EXPECT_EQ(lt::python_fsum({1e16, 1.0, 1e-16}), 10000000000000002.0);
}

TEST(ExpandTabs, EightColumns) {
  EXPECT_EQ(lt::expand_tabs("ab\tc"), "ab      c");
  EXPECT_EQ(lt::expand_tabs("\nabcdefgh\t|"), "\nabcdefgh        |");
}
