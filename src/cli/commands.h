// The subcommand table: one entry and one file per subcommand (cmd_<name>.cc) and one man page
// each (docs/man/parmon-<name>.md).
#ifndef PARMON_SRC_CLI_COMMANDS_H_
#define PARMON_SRC_CLI_COMMANDS_H_

namespace parmon::cli {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);  // argv[0] is the subcommand name
};

int RunRecord(int argc, char** argv);
int RunInfo(int argc, char** argv);
int RunDump(int argc, char** argv);
int RunReport(int argc, char** argv);
int RunDiff(int argc, char** argv);
int RunScale(int argc, char** argv);
int RunDemo(int argc, char** argv);
int RunExport(int argc, char** argv);
int RunTop(int argc, char** argv);
int RunServe(int argc, char** argv);
int RunFetch(int argc, char** argv);
int RunCtl(int argc, char** argv);
int RunView(int argc, char** argv);

}  // namespace parmon::cli

#endif  // PARMON_SRC_CLI_COMMANDS_H_
