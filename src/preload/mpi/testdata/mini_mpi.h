/* A tiny mpi.h-like header for gen_mpi_wrappers_test: the generator's input is a preprocessed
   mpi.h, so this file holds only what the preprocessor would leave (no directives). It covers a
   blocking send and receive, a nonblocking send and its wait, a collective with its nonblocking
   form, a plain Fortran-bindable call, arrays of const counts, a function without a Fortran
   binding, a double-returning one, one the function list does not name, attributes the
   generator must strip, and data symbols for the weak-reference header. */
typedef struct mini_comm* MPI_Comm;
typedef struct mini_datatype* MPI_Datatype;
typedef struct mini_op* MPI_Op;
typedef struct mini_request* MPI_Request;
typedef struct mini_status { int MPI_SOURCE, MPI_TAG, MPI_ERROR; } MPI_Status;
typedef int MPI_Fint;
extern struct mini_comm mini_comm_world;
extern MPI_Fint* MPI_F_STATUS_IGNORE;
int PMPI_Init(int *argc, char ***argv) __attribute__((visibility("default")));
int PMPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int PMPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
              MPI_Status *status);
int PMPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
               MPI_Comm comm, MPI_Request *request);
int PMPI_Wait(MPI_Request *request, MPI_Status *status);
int PMPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                   MPI_Op op, MPI_Comm comm);
int PMPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                    MPI_Op op, MPI_Comm comm, MPI_Request *request);
int PMPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                   MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                   const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm);
int PMPI_Comm_rank(MPI_Comm comm, int *rank);
MPI_Fint PMPI_Comm_c2f(MPI_Comm comm);
int PMPI_Get_processor_name(char *name, int *resultlen);
double PMPI_Wtime(void);
int PMPI_Vendor_extension(MPI_Comm comm, int level) __attribute__((deprecated("not standard")));
