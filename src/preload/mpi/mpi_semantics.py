"""What each MPI function's wrapper records, by name: the table gen_mpi_wrappers.py reads.

SEMANTICS maps a function name (without MPI_) to (hook, argument specs); the collectives (COLL),
one-sided calls (RMA) and communicator constructors (NEWCOMM) are written as compact tables and
expanded into it here; gen_mpi_wrappers.add_derived_semantics adds the nonblocking and persistent
collectives and the I/O calls the installed mpi.h declares. Kept apart from the generator so that
the table can be read (and extended) without the code that prints C and Fortran.
"""
import re

# ---------------------------------------------------------------------------------------------
# Semantics: name -> (hook, args). Arg specs are "<position>:<kind>"; kinds are explained in
# gen_mpi_wrappers.value_expr. Hooks are declared in mpi_core.h (mpi_state.h lists their files).
P2P_SEND = ["0:ptr", "1:int", "2:type", "3:int", "4:int", "5:comm"]
SEMANTICS = {}
for n in ["Send", "Bsend", "Ssend", "Rsend"]:
    SEMANTICS[n] = ("send", P2P_SEND)
for n in ["Isend", "Ibsend", "Issend", "Irsend"]:
    SEMANTICS[n] = ("isend", P2P_SEND + ["6:reqout"])
for n in ["Send_init", "Bsend_init", "Ssend_init", "Rsend_init"]:
    SEMANTICS[n] = ("send_init", P2P_SEND + ["6:reqout"])
SEMANTICS["Recv"] = ("recv", ["1:int", "2:type", "5:comm", "6:status"])
SEMANTICS["Irecv"] = ("irecv", ["5:comm", "6:reqout"])
SEMANTICS["Recv_init"] = ("recv_init", ["5:comm", "6:reqout"])
SEMANTICS["Sendrecv"] = ("sendrecv", ["1:int", "2:type", "3:int", "4:int", "10:comm", "11:status"])
SEMANTICS["Sendrecv_replace"] = ("sendrecv", ["1:int", "2:type", "3:int", "4:int", "7:comm",
                                              "8:status"])
SEMANTICS["Mprobe"] = ("mprobe", ["2:comm", "3:msgout"])
SEMANTICS["Improbe"] = ("mprobe", ["2:comm", "4:msgout"])
SEMANTICS["Mrecv"] = ("mrecv", ["3:msgin", "4:status"])
SEMANTICS["Imrecv"] = ("imrecv", ["3:msgin", "4:reqout"])
SEMANTICS["Start"] = ("start", ["0:reqin"])
SEMANTICS["Startall"] = ("startall", ["0:int", "1:reqarr"])
SEMANTICS["Wait"] = ("wait", ["0:reqin", "1:status"])
SEMANTICS["Test"] = ("test", ["0:reqin", "1:intout", "2:status"])
SEMANTICS["Waitall"] = ("waitall", ["0:int", "1:reqarr", "2:statusarr"])
SEMANTICS["Testall"] = ("testall", ["0:int", "1:reqarr", "2:intout", "3:statusarr"])
SEMANTICS["Waitany"] = ("waitany", ["0:int", "1:reqarr", "2:intout", "3:status"])
SEMANTICS["Testany"] = ("testany", ["0:int", "1:reqarr", "2:intout", "3:intout", "4:status"])
SEMANTICS["Waitsome"] = ("waitsome", ["0:int", "1:reqarr", "2:intout", "3:intarrout",
                                      "4:statusarr"])
SEMANTICS["Testsome"] = ("waitsome", ["0:int", "1:reqarr", "2:intout", "3:intarrout",
                                      "4:statusarr"])
SEMANTICS["Request_free"] = ("request_free", ["0:reqin"])
SEMANTICS["Cancel"] = ("request_free", ["0:reqin"])
SEMANTICS["Init"] = ("init", [])
SEMANTICS["Init_thread"] = ("init", [])
SEMANTICS["Finalize"] = ("finalize", [])

# Collectives. Shapes (see mpi_collectives.cc): the hook gets the shape name and the
# argument list below; nonblocking (I*) and persistent (*_init) forms add the request.
COLL = {
    "Barrier": ("barrier", ["0:comm"]),
    "Bcast": ("bcast", ["1:int", "2:type", "3:int", "4:comm"]),
    "Reduce": ("reduce", ["0:ptr", "2:int", "3:type", "5:int", "6:comm"]),
    "Allreduce": ("allreduce", ["0:ptr", "2:int", "3:type", "5:comm"]),
    "Scan": ("allreduce", ["0:ptr", "2:int", "3:type", "5:comm"]),
    "Exscan": ("allreduce", ["0:ptr", "2:int", "3:type", "5:comm"]),
    "Reduce_scatter_block": ("redscat_block", ["0:ptr", "2:int", "3:type", "5:comm"]),
    "Reduce_scatter": ("redscat", ["0:ptr", "2:intarr", "3:type", "5:comm"]),
    "Gather": ("gather", ["0:ptr", "1:int", "2:type", "4:int", "5:type", "6:int", "7:comm"]),
    "Scatter": ("scatter", ["1:int", "2:type", "3:ptr", "4:int", "5:type", "6:int", "7:comm"]),
    "Allgather": ("allgather", ["0:ptr", "1:int", "2:type", "4:int", "5:type", "6:comm"]),
    "Alltoall": ("alltoall", ["0:ptr", "1:int", "2:type", "4:int", "5:type", "6:comm"]),
    "Gatherv": ("gatherv", ["0:ptr", "1:int", "2:type", "4:intarr", "6:type", "7:int", "8:comm"]),
    "Scatterv": ("scatterv", ["1:intarr", "3:type", "4:ptr", "5:int", "6:type", "7:int",
                              "8:comm"]),
    "Allgatherv": ("allgatherv", ["0:ptr", "1:int", "2:type", "4:intarr", "6:type", "7:comm"]),
    "Alltoallv": ("alltoallv", ["0:ptr", "1:intarr", "3:type", "5:intarr", "7:type", "8:comm"]),
    "Alltoallw": ("alltoallw", ["0:ptr", "1:intarr", "3:typearr", "5:intarr", "7:typearr",
                                "8:comm"]),
    "Neighbor_allgather": ("nb_allgather", ["1:int", "2:type", "4:int", "5:type", "6:comm"]),
    "Neighbor_alltoall": ("nb_alltoall", ["1:int", "2:type", "4:int", "5:type", "6:comm"]),
    "Neighbor_allgatherv": ("nb_allgatherv", ["1:int", "2:type", "4:intarr", "6:type", "7:comm"]),
    "Neighbor_alltoallv": ("nb_alltoallv", ["1:intarr", "3:type", "5:intarr", "7:type",
                                            "8:comm"]),
    "Neighbor_alltoallw": ("nb_alltoallw", ["1:intarr", "3:typearr", "5:intarr", "7:typearr",
                                            "8:comm"]),
}


def nonblocking_name(name):
    """MPI_Bcast -> MPI_Ibcast: the nonblocking form of a collective."""
    return "I" + name[0].lower() + name[1:]


# One-sided: (origin count, origin type, target rank, win) positions.
RMA = {
    "Put": (1, 2, 3, 7), "Get": (1, 2, 3, 7), "Accumulate": (1, 2, 3, 8),
    "Get_accumulate": (1, 2, 6, 11), "Rput": (1, 2, 3, 7), "Rget": (1, 2, 3, 7),
    "Raccumulate": (1, 2, 3, 8), "Rget_accumulate": (1, 2, 6, 11),
}
for name, (c, t, r, w) in RMA.items():
    SEMANTICS[name] = ("rma", ["%d:int" % c, "%d:type" % t, "%d:int" % r, "%d:win" % w])
SEMANTICS["Fetch_and_op"] = ("rma1", ["2:type", "3:int", "6:win"])
SEMANTICS["Compare_and_swap"] = ("rma1", ["3:type", "4:int", "6:win"])

# Communicator creation: the position of the new communicator (output).
NEWCOMM = {"Comm_dup": 1, "Comm_dup_with_info": 2, "Comm_split": 3, "Comm_split_type": 4,
           "Comm_create": 2, "Comm_create_group": 3, "Cart_create": 5, "Cart_sub": 2,
           "Graph_create": 5, "Dist_graph_create": 8, "Dist_graph_create_adjacent": 9,
           "Intercomm_create": 5, "Intercomm_merge": 2, "Comm_create_from_group": 4}
for name, pos in NEWCOMM.items():
    SEMANTICS[name] = ("newcomm", ["%d:commout" % pos])
SEMANTICS["Comm_free"] = ("comm_free", ["0:commin"])

# C functions with no Fortran binding, or a different one; they get a C wrapper only.
NO_FORTRAN = re.compile(r"(_f2c|_c2f|_f082c|_c2f08|_f082f|_f2f08|_toint|_fromint)$|^(Init|"
                        r"Init_thread|Pcontrol|Wtime|Wtick|Status_f2c|Status_c2f|Type_create_f90_.*|"
                        r"Sizeof|Session_.*|Abi_.*)$")
# Functions never wrapped: variadic, or called by parmon's own code paths.
SKIP = {"Pcontrol"}
