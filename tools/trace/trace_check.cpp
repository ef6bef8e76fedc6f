// `ordo trace check FILE` (docs/traces.md): the DESIGN §2.1 rules on the trace's happens-before
// graph (messages/trace/trace_check.hpp). Exit 0 with a one-line summary, 1 naming the first
// violation (and a line of advice), 2 when the file cannot be read.
#include <cstdlib>
#include <exception>
#include <iostream>

#include <kj/exception.h>

#include "messages/trace/trace_check.hpp"
#include "tools/trace/trace_tools.hpp"

namespace ordo {

int run_trace_check(const std::string& path) {
  trace_contents contents;
  try {
    contents = read_trace(path);
  } catch (const std::exception& e) {
    std::string why = e.what(); // names the path already when it comes from trace_reader
    std::cerr << "ordo trace check: " << (why.rfind(path, 0) == 0 ? why : "cannot read " + path + ": " + why) << "\n";
    return 2;
  }
  trace_check_result result;
  try {
    result = check_trace(contents);
  } catch (const kj::Exception& e) { // before std::exception: its what() carries a stack trace
    std::cerr << "ordo trace check: " << path << " is not a readable trace: " << e.getDescription().cStr() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "ordo trace check: " << path << " is not a readable trace: " << e.what() << "\n";
    return 2;
  }
  auto warning = result.warning();
  if (!warning.empty())
    std::cerr << warning << "\n";
  if (std::getenv("ORDO_TRACE_CHECK_VERBOSE"))
    std::cerr << "trace check: " << result.commits_checked << " store commits checked against their save, "
              << result.images_checked << " READY images against the completion of the step that wrote them, " << result.unmatched
              << " unmatched\n";
  std::cout << result.summary() << std::endl;
  return result.violation ? 1 : 0;
}

} // namespace ordo
