// Action names come from the traced program and may hold terminal control
// sequences ("\x1b[2J" clears the screen).  When stdout or stderr is a
// terminal, its stream shows control characters escaped instead (C0 but
// tab and newline as \xNN, DEL as \x7f, C1 as \u0080..\u009f); files, pipes
// and other non-terminal outputs stay byte-exact with Lightning.
#pragma once
#include <string>

namespace lt {

// `text` with control characters escaped as above (valid UTF-8 in, out).
std::string escape_terminal_controls(const std::string& text);

// Filters std::cout / std::cerr through escape_terminal_controls when
// stdout / stderr is a terminal.  Call once, at the start of main.
void escape_controls_on_terminals();

// Filters std::cout / std::cerr through utf8_text (user/text/utf8_text.h),
// terminal or not: names that are not UTF-8 (lone surrogates, raw bytes)
// come out as Python's backslashreplace writes them.  Call once, after
// escape_controls_on_terminals.
void valid_utf8_on_std_streams();

}  // namespace lt
