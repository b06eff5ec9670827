#ifndef SLUICE_DAEMON_H
#define SLUICE_DAEMON_H
#endif
